"""SGLang: its CuTe-DSL fused norm kernels and its batch-invariant RMSNorm as candidates, and its
batch-invariant ops as the ``sglang`` / ``sglang_ieee`` / ``sglang_deepgemm`` modes.

Candidate ``sglang`` (norm_modulate): ``fused_norm_scale_shift(x, w, None, scale, shift, "rms",
eps)`` with x as (1, S, H) and scale/shift as (1, S, H) per-token rows gathered with
``index_select`` (the kernel takes [1], [D], [1|B, D], [1|B, 1|S, D] or [B, F, 1, D]). Forward
only: SGLang gives it no backward, so only its output is compared. It needs H % 256 == 0 and
H <= 8192 (one CTA of H / 256 warps per row) and says so itself otherwise. Expected: each row is
computed by one CTA alone, so the output cannot depend on the other rows; it keeps
``x * rstd * w`` in FP32 and rounds once before the FP32 modulation, so bitwise equality with
eager is not expected.

Candidate ``sglang_fused_residual`` (gate_residual): ``fused_scale_residual_norm_scale_shift(res,
y, gate_rows, None, None, 0, 0, "rms", eps)`` on (1, S, H) tensors returns ``(norm(res + gate*y)
* (1 + scale) + shift, res + gate*y)``; its second output is gate_residual, and is what is
compared (the first is computed too, with zero scale and shift, and is part of its latency).
Forward only, like ``sglang``.

Candidate ``sglang_bi_rmsnorm`` (norm_modulate): ``rms_norm_batch_invariant(x, w, eps=1e-5)``
from the batch-invariant ops (its default eps is 1e-6), modulated with ``index_select`` like the
references. It launches a Triton kernel (one program per row, FP32 sum of squares,
``x * (1 / sqrt(ms + eps)) * w`` in FP32, rounded once) into a fresh tensor, with no autograd
function around it: no gradient reaches x or w, so the candidate is forward only.

Modes: ``sglang.srt.batch_invariant_ops.enable_batch_invariant_mode()`` registers aten overrides
(mm, addmm, bmm, _log_softmax, mean.dim) for the whole process; ``disable_batch_invariant_mode()``
removes them. On sm_90+, bf16 mm goes to DeepGEMM when ``deep_gemm`` imports and
SGLANG_BATCH_INVARIANT_OPS_ENABLE_MM_DEEPGEMM is "1" (SGLang's default, read at import): the
``sglang`` and ``sglang_ieee`` modes set it to "0" (the Triton persistent matmul), and
``sglang_deepgemm`` sets "1" and refuses where DeepGEMM would not be used.
"""

from __future__ import annotations

import importlib
import os

import torch

from adapters.diffusers import modulate
from audit.core.candidates import candidate
from audit.core.packages import import_problem, shipped_module, version
from audit.core.ops import EPS
from modes import SGLANG_DEEPGEMM

# where fused_norm_scale_shift lives: 0.5.10, then the later layout
_KERNEL_MODULES = (
    "sglang.jit_kernel.diffusion.cutedsl.scale_residual_norm_scale_shift",
    "sglang.kernels.ops.diffusion.norm.scale_residual_norm_cutedsl",
)
KERNEL = shipped_module(_KERNEL_MODULES)
_MODE_MODULE = "sglang.srt.batch_invariant_ops"


@candidate(
    "sglang",
    ops=("norm_modulate",),
    source=lambda mode, device: f"SGLang {version('sglang')} fused_norm_scale_shift (CuTe DSL, {KERNEL}; forward only)",
    grads=(),
    requires=(KERNEL,),
    cuda_only=True,
)
def sglang(t: dict[str, torch.Tensor]) -> torch.Tensor:
    fused_norm_scale_shift = importlib.import_module(KERNEL).fused_norm_scale_shift
    scale, shift = _token_rows(t["sc"], t["idx"]), _token_rows(t["sh"], t["idx"])
    return fused_norm_scale_shift(t["x"].unsqueeze(0), t["w"], None, scale, shift, "rms", EPS).squeeze(0)


@candidate(
    "sglang_fused_residual",
    ops=("gate_residual",),
    source=lambda mode, device: (
        f"SGLang {version('sglang')} fused_scale_residual_norm_scale_shift (CuTe DSL, {KERNEL}), "
        "its residual output res + gate*y; forward only"
    ),
    grads=(),
    requires=(KERNEL,),
    cuda_only=True,
)
def sglang_fused_residual(t: dict[str, torch.Tensor]) -> torch.Tensor:
    fused = importlib.import_module(KERNEL).fused_scale_residual_norm_scale_shift
    res, y = t["res"].unsqueeze(0), t["y"].unsqueeze(0)
    zero = res.new_zeros(res.shape[-1])  # scale and shift of the norm output, which is not compared
    _, residual = fused(res, y, _token_rows(t["gate"], t["idx"]), None, None, zero, zero, "rms", EPS)
    return residual.squeeze(0)


def _token_rows(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """One (1, S, H) row of ``table`` per token, the [1, S, D] layout the CuTe kernels take."""
    return table.index_select(0, idx).unsqueeze(0)


@candidate(
    "sglang_bi_rmsnorm",
    ops=("norm_modulate",),
    source=lambda mode, device: (
        f"SGLang {version('sglang')} {_MODE_MODULE}.rms_norm_batch_invariant + index_select (forward only)"
    ),
    grads=(),
    requires=(_MODE_MODULE,),
    cuda_only=True,
)
def sglang_bi_rmsnorm(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return modulate(_mode_module().rms_norm_batch_invariant(t["x"], t["w"], EPS), t)


def _deepgemm_routes() -> bool:
    """Whether SGLang's batch-invariant mm sends bf16 to DeepGEMM in this process."""
    impl = importlib.import_module(f"{_MODE_MODULE}.batch_invariant_ops")
    return bool(getattr(impl, "ENABLE_JIT_DEEPGEMM", False) and getattr(impl, "_ENABLE_MM_DEEPGEMM", False))


def _mode_module():
    problem = import_problem(_MODE_MODULE)
    if problem:
        raise ImportError(problem)
    return importlib.import_module(_MODE_MODULE)


def mode_problem(mode) -> str | None:
    """Why ``mode`` cannot run here, without switching it on: the batch-invariant ops must import,
    and a mode asking for DeepGEMM needs ``deep_gemm``."""
    problem = import_problem(_MODE_MODULE)
    if problem is None and mode.env.get(SGLANG_DEEPGEMM) == "1":
        deep_gemm = import_problem("deep_gemm")
        problem = deep_gemm and f"{mode.name} needs DeepGEMM: {deep_gemm}"
    return problem


def enable_mode(mode) -> str:
    """Switch SGLang's batch-invariant ops on for this process; returns what was switched on.
    Refuses, before switching anything on, a mode asking for DeepGEMM that SGLang would not use."""
    ops = _mode_module()
    deepgemm = _deepgemm_routes()
    if mode.env.get(SGLANG_DEEPGEMM) == "1" and not deepgemm:
        raise RuntimeError(
            f"SGLang {version('sglang')} would not send bf16 mm to DeepGEMM here: it needs sm_90+, an importable "
            "deep_gemm and SGLANG_ENABLE_JIT_DEEPGEMM on (ENABLE_JIT_DEEPGEMM is False)"
        )
    ops.enable_batch_invariant_mode()
    dot = os.environ.get("TRITON_F32_DEFAULT", "tf32 (Triton default)")
    matmul = "DeepGEMM bf16 (Triton persistent matmul otherwise)" if deepgemm else "Triton persistent matmul"
    return (
        f"SGLang {version('sglang')} {_MODE_MODULE}.enable_batch_invariant_mode(): aten mm/addmm/bmm via "
        f"{matmul}, _log_softmax and mean.dim overridden; FP32 dot {dot} [{mode.name}]"
    )


def disable_mode(mode) -> str:
    _mode_module().disable_batch_invariant_mode()
    return f"SGLang {version('sglang')} {_MODE_MODULE}.disable_batch_invariant_mode() [{mode.name}]"
