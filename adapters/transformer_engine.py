"""Transformer Engine's RMSNorm as norm_modulate candidates.

``transformer_engine``: the module ``transformer_engine.pytorch.RMSNorm(H, eps=1e-5, dtype=bf16)``,
built once per device, with the case's w copied into its weight before each call (its backward
reads its own parameter, so a weight handed in through ``functional_call`` would give a wrong dx,
and gradients with respect to w do not reach the inputs: grad x only). Its output is the
normalised row alone, so it computes what ``torch_rms_norm`` computes and is judged against that
in FP64; against the references' modulated output it differs by construction.

``te_rmsnorm_full``: TE's kernels themselves, ``transformer_engine_torch.rmsnorm_fwd`` (output and
FP32 rsigma) and ``rmsnorm_bwd`` (dx and dw) in an autograd function, modulated with
``index_select`` like the references: a full norm_modulate candidate whose dw is compared too.
``transformer_engine_cudnn`` is the same function in the ``te_cudnn`` mode's process, where
NVTE_NORM_FWD_USE_CUDNN and NVTE_NORM_BWD_USE_CUDNN (read once per process) send both passes to
cuDNN's normalization instead of TE's own kernels.

Expected, not assumed: TE's own forward runs one CTA per row, its backward (for H = 5376, no tuned
kernel) two CTAs per row and folds dw from per-CTA partials, so dw may depend on the row count.
"""

from __future__ import annotations

import functools
import os

import torch

from adapters.diffusers import modulate
from audit.core.candidates import candidate
from audit.core.ops import EPS, HIDDEN

_KERNELS = ("transformer_engine.pytorch", "transformer_engine_torch")
_CUDNN_ENV = ("NVTE_NORM_FWD_USE_CUDNN", "NVTE_NORM_BWD_USE_CUDNN")


def _version() -> str:
    import transformer_engine

    return transformer_engine.__version__


@functools.cache
def _module(device: torch.device) -> torch.nn.Module:
    """TE's RMSNorm module on ``device``; its weight is overwritten by every call, and does not
    require grad, so no gradient accumulates in it from call to call."""
    import transformer_engine.pytorch as te

    norm = te.RMSNorm(HIDDEN, eps=EPS, dtype=torch.bfloat16, device=device)
    norm.weight.requires_grad_(False)
    return norm


@candidate(
    "transformer_engine",
    ops=("norm_modulate",),
    source=lambda mode, device: f"TE {_version()} RMSNorm module (no modulation)",
    grads=("x",),
    requires=("transformer_engine.pytorch",),
    cuda_only=True,
    computes="torch_rms_norm",
)
def transformer_engine(t: dict[str, torch.Tensor]) -> torch.Tensor:
    x = t["x"]
    norm = _module(x.device)
    with torch.no_grad():
        norm.weight.copy_(t["w"])
    return norm(x)


class _RMSNorm(torch.autograd.Function):
    """TE's RMSNorm forward and backward kernels, unscaled (no zero-centred gamma, no SM margin)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        import transformer_engine_torch as tex
        from transformer_engine.pytorch.constants import TE_DType

        # input, weight, eps, ln_out, quantizer, otype, sm_margin, zero_centered_gamma
        y, _, rsigma = tex.rmsnorm_fwd(x, w, EPS, None, None, TE_DType[x.dtype], 0, False)
        ctx.save_for_backward(x, w, rsigma)
        return y

    @staticmethod
    def backward(ctx, dy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        import transformer_engine_torch as tex

        x, w, rsigma = ctx.saved_tensors
        dx, dw = tex.rmsnorm_bwd(dy, x, rsigma, w, 0, False)  # dz, x, rsigma, gamma, sm_margin, zero_centered_gamma
        return dx, dw


def _full(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return modulate(_RMSNorm.apply(t["x"], t["w"]), t)


def _full_source(mode: str, device: torch.device) -> str:
    env = ", ".join(f"{name}={os.environ.get(name, 'unset')}" for name in _CUDNN_ENV)
    return f"TE {_version()} transformer_engine_torch.rmsnorm_fwd/rmsnorm_bwd + index_select ({env})"


_FULL = dict(
    ops=("norm_modulate",), source=_full_source, grads=("x", "w", "sh", "sc"), requires=_KERNELS, cuda_only=True
)
candidate("te_rmsnorm_full", **_FULL)(_full)
candidate("transformer_engine_cudnn", mode="te_cudnn", **_FULL)(_full)
