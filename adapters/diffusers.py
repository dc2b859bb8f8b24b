"""diffusers' MiniMax-H3 code (diffusers >= 0.42.1, ``transformer_minimax_h3``): the first reference.

The modules are built on the meta device (no memory) and called with the case's tensors as their
parameters through ``torch.func.functional_call``, so the real ``forward`` runs on the real inputs
and gradients reach those inputs.
- norm_modulate: ``MiniMaxH3TransformerBlock.norm1`` (``nn.RMSNorm(H, eps=1e-5)``), then the block's
  modulation expression ``norm * (1.0 + scale.index_select(0, idx)) + shift.index_select(0, idx)``.
- gate_residual: the block's ``residual + gate.index_select(0, idx) * y``.
- timestep_mlp: ``TimestepEmbedding(256, 5376, out_dim=2688)`` in FP32.
- adaln_projection: ``MiniMaxH3AdaLayerNormModulation(2688, 5376)`` (SiLU at temb's FP32, cast to
  the BF16 weight dtype, linear). The module returns six (3T, H) chunks, views of its linear
  layer's (T, 18H) output; a forward hook on ``module.linear`` hands back that output itself (the
  same bits as the chunks put back together), so the timing holds no copy.
Every diffusers candidate requires that module: where diffusers is missing or has no MiniMax-H3,
the candidate is unavailable with that reason (it is never replaced by the same ops written here).
The GEMM ops run in every mode, as ``diffusers[MODE]``.
"""

from __future__ import annotations

import functools

import torch
from torch.func import functional_call

from audit.core.candidates import candidate

from audit.core.packages import version
from audit.core.ops import EPS, FREQ_CHANNELS, HIDDEN, TIME_EMBED, TIME_MLP_HIDDEN

_H3 = "diffusers.models.transformers.transformer_minimax_h3"


@functools.cache
def _h3():
    """The MiniMax-H3 module of the installed diffusers (the candidates require it)."""
    import importlib

    return importlib.import_module(_H3)


def _prefix() -> str:
    return f"diffusers {version('diffusers')}"


@functools.cache
def _block_norm() -> torch.nn.Module:
    h3 = _h3()
    with torch.device("meta"):
        block = h3.MiniMaxH3TransformerBlock(
            hidden_size=HIDDEN,
            num_attention_heads=HIDDEN // 128,
            attention_head_dim=128,
            ffn_dim=4 * HIDDEN,
            time_embed_dim=TIME_EMBED,
            norm_eps=EPS,
            qk_norm_eps=1e-6,
        )
    return block.norm1


@functools.cache
def _timestep_embedding() -> torch.nn.Module:
    from diffusers.models.embeddings import TimestepEmbedding

    with torch.device("meta"):
        return TimestepEmbedding(in_channels=FREQ_CHANNELS, time_embed_dim=TIME_MLP_HIDDEN, out_dim=TIME_EMBED)


@functools.cache
def _adaln_modulation() -> torch.nn.Module:
    h3 = _h3()
    with torch.device("meta"):
        return h3.MiniMaxH3AdaLayerNormModulation(time_embed_dim=TIME_EMBED, hidden_size=HIDDEN).to(torch.bfloat16)


@candidate(
    "diffusers",
    requires=(_H3,),
    ops=("norm_modulate",),
    source=lambda mode, device: f"{_prefix()} MiniMaxH3TransformerBlock.norm1 (nn.RMSNorm) + index_select modulation",
)
def norm_modulate(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return modulate(functional_call(_block_norm(), {"weight": t["w"]}, (t["x"],)), t)


def modulate(normed: torch.Tensor, t: dict[str, torch.Tensor]) -> torch.Tensor:
    """The block's modulation of a normalised (S, H) row block by the case's tables, in its own
    words: ``norm * (1.0 + scale.index_select(0, idx)) + shift.index_select(0, idx)``. The other
    norm_modulate candidates built from a library norm modulate with it too."""
    idx = t["idx"]
    return normed * (1.0 + t["sc"].index_select(0, idx)) + t["sh"].index_select(0, idx)


@candidate(
    "diffusers",
    requires=(_H3,),
    ops=("gate_residual",),
    source=lambda mode, device: f"{_prefix()} residual + gate.index_select(...) * y",
)
def gate_residual(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return t["res"] + t["gate"].index_select(0, t["idx"]) * t["y"]


@candidate(
    "diffusers",
    requires=(_H3,),
    ops=("timestep_mlp",),
    source=lambda mode, device: f"{_prefix()} TimestepEmbedding, FP32 F.linear [{mode}]",
    all_modes=True,
)
def timestep_mlp(t: dict[str, torch.Tensor]) -> torch.Tensor:
    module = _timestep_embedding()
    params = {
        "linear_1.weight": t["w1"],
        "linear_1.bias": t["b1"],
        "linear_2.weight": t["w2"],
        "linear_2.bias": t["b2"],
    }
    return functional_call(module, params, (t["x"],))


@candidate(
    "diffusers",
    requires=(_H3,),
    ops=("adaln_projection",),
    source=lambda mode, device: (
        f"{_prefix()} AdaLN projection (MiniMaxH3AdaLayerNormModulation), BF16 F.linear [{mode}]"
    ),
    all_modes=True,
)
def adaln_projection(t: dict[str, torch.Tensor]) -> torch.Tensor:
    temb = t["temb"]
    module = _adaln_modulation()
    projected: list[torch.Tensor] = []
    hook = module.linear.register_forward_hook(lambda linear, args, out: projected.append(out))
    try:
        functional_call(module, {"linear.weight": t["w"], "linear.bias": t["b"]}, (temb,))
    finally:
        hook.remove()
    return projected[0]
