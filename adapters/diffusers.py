"""diffusers' MiniMax-H3 code (diffusers >= 0.42.1, ``transformer_minimax_h3``): the first reference.

The modules are built on the meta device (no memory) and called with the case's tensors as their
parameters through ``torch.func.functional_call``, so diffusers' own code runs on the real inputs
and gradients reach those inputs.
- norm_modulate and gate_residual: the operations that ``MiniMaxH3TransformerBlock.forward`` itself
  performs (``audit.core.chain.run_expression``, the chain's provider stages run them too): from
  ``hidden_states`` through ``norm1`` (``nn.RMSNorm(H, eps=1e-5)``) and the msa modulation to the
  tensor forward passes to ``attn``; from ``hidden_states``, ``attn``'s output and ``gate_msa`` to
  the tensor forward passes to ``norm2``. Whatever forward writes there is what runs, so the output
  is bitwise forward's own for the same tensors.
- gate_residual_norm_modulate: the same, from ``hidden_states``, ``attn``'s output, ``gate_msa``,
  ``shift_mlp`` and ``scale_mlp`` to both the tensor forward passes to ``norm2`` and the one it
  passes to ``ff``, stacked as (S, 2, H) (a copy, no rounding).
- timestep_sinusoid: the model's ``time_proj``, ``Timesteps(256, flip_sin_to_cos=True,
  downscale_freq_shift=0)``, called as a module.
- final_adaln_out: ``MiniMaxH3AdaLayerNormOut(5376, 2688, 1e-5)`` (the model's ``norm_out``), its whole
  forward: projection, split into shift then scale, norm and the per-timestep modulation.
- timestep_mlp: ``TimestepEmbedding(256, 5376, out_dim=2688)`` in FP32.
- adaln_projection: ``MiniMaxH3AdaLayerNormModulation(2688, 5376)`` (SiLU at temb's FP32, cast to
  the BF16 weight dtype, linear). The module returns six (3T, H) chunks, views of its linear
  layer's (T, 18H) output; a forward hook on ``module.linear`` hands back that output itself and
  stops forward there (the same bits as the chunks put back together), so the timing holds no copy
  and a tp_column shard of w, whose width forward could not view as six tables, runs too.
Every diffusers candidate requires that module: where diffusers is missing or has no MiniMax-H3,
the candidate is unavailable with that reason (it is never replaced by the same ops written here).
The GEMM ops run in every mode, as ``diffusers[MODE]``.
"""

from __future__ import annotations

import functools

import torch
from torch.func import functional_call

from audit.core.candidates import candidate
from audit.core.chain import (
    GATE_RESIDUAL_MSA,
    GATE_RESIDUAL_NORM2_MODULATE,
    MODULATE_MSA,
    NORM1_MODULATE,
    Expression,
    run_expression,
)
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
def _block() -> torch.nn.Module:
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
    return block


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


@functools.cache
def _norm_out() -> torch.nn.Module:
    h3 = _h3()
    with torch.device("meta"):
        return h3.MiniMaxH3AdaLayerNormOut(hidden_size=HIDDEN, time_embed_dim=TIME_EMBED, eps=EPS).to(torch.bfloat16)


@functools.cache
def _time_proj() -> torch.nn.Module:
    from diffusers.models.embeddings import Timesteps

    return Timesteps(num_channels=FREQ_CHANNELS, flip_sin_to_cos=True, downscale_freq_shift=0)


def _block_source(expression: Expression) -> str:
    return f"{_prefix()} MiniMaxH3TransformerBlock.forward, {expression.label}"


@candidate(
    "diffusers",
    requires=(_H3,),
    ops=("norm_modulate",),
    source=lambda mode, device: _block_source(NORM1_MODULATE),
)
def norm_modulate(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return run_expression(_block(), NORM1_MODULATE, t)


def modulate(normed: torch.Tensor, t: dict[str, torch.Tensor]) -> torch.Tensor:
    """The block's msa modulation of a normalised (S, H) row block by the case's tables, as
    ``MiniMaxH3TransformerBlock.forward`` performs it on ``norm1``'s output (bitwise). The other
    norm_modulate candidates built from a library norm modulate with it, so they need diffusers'
    MiniMax-H3 module too (without it they raise ModuleNotFoundError, which the report records)."""
    return run_expression(_block(), MODULATE_MSA, t | {"normed": normed})


@candidate(
    "diffusers",
    requires=(_H3,),
    ops=("gate_residual",),
    source=lambda mode, device: _block_source(GATE_RESIDUAL_MSA),
)
def gate_residual(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return run_expression(_block(), GATE_RESIDUAL_MSA, t)


@candidate(
    "diffusers",
    requires=(_H3,),
    ops=("gate_residual_norm_modulate",),
    source=lambda mode, device: _block_source(GATE_RESIDUAL_NORM2_MODULATE),
)
def gate_residual_norm_modulate(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.stack(run_expression(_block(), GATE_RESIDUAL_NORM2_MODULATE, t), dim=1)


@candidate(
    "diffusers",
    requires=(_H3,),
    ops=("timestep_sinusoid",),
    source=lambda mode, device: f"{_prefix()} Timesteps(256, flip_sin_to_cos=True, downscale_freq_shift=0)",
)
def timestep_sinusoid(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return _time_proj()(t["t"])


@candidate(
    "diffusers",
    requires=(_H3,),
    ops=("final_adaln_out",),
    source=lambda mode, device: f"{_prefix()} MiniMaxH3AdaLayerNormOut.forward (norm_out)",
)
def final_adaln_out(t: dict[str, torch.Tensor]) -> torch.Tensor:
    params = {"norm.weight": t["w"], "linear.weight": t["wp"], "linear.bias": t["bp"]}
    return functional_call(_norm_out(), params, (t["x"], t["temb"], t["idx"]))


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
    module = _adaln_modulation()

    def stop(linear, args, out):
        raise _Projected(out)

    hook = module.linear.register_forward_hook(stop)
    try:
        functional_call(module, {"linear.weight": t["w"], "linear.bias": t["b"]}, (t["temb"],))
    except _Projected as projected:
        return projected.out
    finally:
        hook.remove()
    raise RuntimeError(f"{_prefix()} MiniMaxH3AdaLayerNormModulation.forward never called its linear layer")


class _Projected(Exception):
    """Carries the module's linear output out of its forward, which stops there: what forward does
    next (a view into (-1, 6H) and six chunks) adds no rounding, and needs all 18H output features,
    which a tp_column shard of w does not have."""

    def __init__(self, out: torch.Tensor):
        super().__init__("the linear layer's output")
        self.out = out
