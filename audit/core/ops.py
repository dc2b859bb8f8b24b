"""The operators the audit checks: their inputs, how each input is drawn, which inputs get
gradients, which dimension is the row dimension, the cases, and the references.

Shapes are MiniMax-H3's as diffusers 0.42.1 builds it (README "What is compared" lists them).
An op is "row" when every output row depends only on the same row of the row inputs (plus shared
tables/parameters), "gemm" when it is a row-wise linear map; both kinds have dimension 0 as the row
dimension of their row inputs and of their output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import torch

HIDDEN = 5376  # H
TIME_EMBED = 2688  # D
FREQ_CHANNELS = 256  # F1
TIME_MLP_HIDDEN = 5376
MODALITIES = 3
TIMESTEPS = 3
TABLE_ROWS = TIMESTEPS * MODALITIES  # 9 (timestep, modality) rows
ADALN_OUT = 6 * HIDDEN * MODALITIES  # 96768
EPS = 1e-5
PARAM_SEED = 1  # shared parameters and tables are drawn with seed 1


@dataclass(frozen=True)
class Normal:
    """``(randn(shape, generator=seed*1000+salt) * scale).to(dtype)``."""

    salt: int
    scale: float = 1.0


@dataclass(frozen=True)
class UniformOffset:
    """``(offset + rand(shape, generator=seed*1000+salt)).to(dtype)``."""

    salt: int
    offset: float


@dataclass(frozen=True)
class PackedIndex:
    """Row index into the (timestep, modality) table of the packed layout: ``timestep * 3 + modality``
    per row (``audit.inputs.packed_index``)."""


@dataclass(frozen=True)
class TimestepIndex:
    """Row index into a per-timestep table: the timestep part of ``PackedIndex`` for the same seed
    (``packed_index // 3``), as ``MiniMaxH3AdaLayerNormOut`` indexes its table."""


Draw = Normal | UniformOffset | PackedIndex | TimestepIndex


@dataclass(frozen=True)
class InputSpec:
    name: str
    shape: Callable[[int], tuple[int, ...]]  # case size (rows) -> shape
    dtype: torch.dtype
    draw: Draw
    rows: bool  # dimension 0 is the row dimension and the input is drawn with the case seed
    grad: bool  # the op's gradient with respect to this input is compared


@dataclass(frozen=True)
class OpSpec:
    name: str
    kind: Literal["row", "gemm"]
    summary: str
    inputs: tuple[InputSpec, ...]
    out_shape: Callable[[int], tuple[int, ...]]
    out_dtype: torch.dtype
    cases: tuple[int, ...]
    cpu_cases: tuple[int, ...]  # default cases on a CPU device, where the full ones take too long
    references: tuple[str, ...]  # report names of the candidates every other one is compared to

    @property
    def grads(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.inputs if i.grad)

    @property
    def row_inputs(self) -> tuple[str, ...]:
        return tuple(i.name for i in self.inputs if i.rows)

    def input(self, name: str) -> InputSpec:
        return next(i for i in self.inputs if i.name == name)


def _rows(width: int) -> Callable[[int], tuple[int, ...]]:
    return lambda n: (n, width)


def _fixed(*shape: int) -> Callable[[int], tuple[int, ...]]:
    return lambda n: shape


_bf16, _f32, _i64 = torch.bfloat16, torch.float32, torch.int64
_index = InputSpec("idx", lambda n: (n,), _i64, PackedIndex(), rows=True, grad=False)
_weight = InputSpec("w", _fixed(HIDDEN), _bf16, UniformOffset(11, 0.5), rows=False, grad=True)
_shift = InputSpec("sh", _fixed(TABLE_ROWS, HIDDEN), _bf16, Normal(12, 0.1), rows=False, grad=True)
_scale = InputSpec("sc", _fixed(TABLE_ROWS, HIDDEN), _bf16, Normal(13, 0.1), rows=False, grad=True)
_res = InputSpec("res", _rows(HIDDEN), _bf16, Normal(15), rows=True, grad=True)
_y = InputSpec("y", _rows(HIDDEN), _bf16, Normal(16), rows=True, grad=True)
_gate = InputSpec("gate", _fixed(TABLE_ROWS, HIDDEN), _bf16, Normal(17, 0.1), rows=False, grad=True)


def _bf16_row_op(name: str, summary: str, inputs: tuple[InputSpec, ...], width: int = 1) -> OpSpec:
    """A BF16 row op of H-wide rows (``width`` outputs of them stacked on dimension 1), with the row
    ops' cases and both references."""
    return OpSpec(
        name=name,
        kind="row",
        summary=summary,
        inputs=inputs,
        out_shape=_rows(HIDDEN) if width == 1 else lambda n: (n, width, HIDDEN),
        out_dtype=_bf16,
        cases=(1, 257, 4097, 32768),
        cpu_cases=(1, 257, 4097),
        references=("diffusers", "rl_kernel"),
    )


OPS: dict[str, OpSpec] = {
    op.name: op
    for op in (
        _bf16_row_op(
            "norm_modulate",
            "rmsnorm(x, w) * (1 + sc[idx]) + sh[idx], bf16 (the block's norm1/norm2 + modulation)",
            (
                InputSpec("x", _rows(HIDDEN), _bf16, Normal(10, 2.0), rows=True, grad=True),
                _weight,
                _shift,
                _scale,
                _index,
            ),
        ),
        _bf16_row_op(
            "gate_residual", "res + gate[idx] * y, bf16 (the block's gated residual)", (_res, _y, _gate, _index)
        ),
        _bf16_row_op(
            "gate_residual_norm_modulate",
            "h1 = res + gate[idx] * y, then rmsnorm(h1, w) * (1 + sc[idx]) + sh[idx]; both outputs stacked "
            "as (S, 2, H) bf16 (the block's msa gated residual, norm2 and mlp modulation)",
            (_res, _y, _gate, _weight, _shift, _scale, _index),
            width=2,
        ),
        OpSpec(
            name="timestep_sinusoid",
            kind="row",
            summary=(
                "[cos(t * f), sin(t * f)], f = exp(-ln(10^4) * arange(128) / 128), (T,) fp32 -> (T, 256) fp32 "
                "(Timesteps(256, flip_sin_to_cos=True, downscale_freq_shift=0)); timesteps are data: no gradient"
            ),
            inputs=(InputSpec("t", lambda n: (n,), _f32, UniformOffset(22, 0.0), rows=True, grad=False),),
            out_shape=_rows(FREQ_CHANNELS),
            out_dtype=_f32,
            cases=(1, 3, 64, 2048),
            cpu_cases=(1, 3, 64, 2048),
            references=("diffusers", "rl_kernel"),
        ),
        _bf16_row_op(
            "final_adaln_out",
            "shift, scale = linear(silu(temb).to(bf16), wp, bp).chunk(2); rmsnorm(x, w) * (1 + scale[idx]) "
            "+ shift[idx], idx per timestep, bf16 (norm_out, MiniMaxH3AdaLayerNormOut)",
            (
                InputSpec("x", _rows(HIDDEN), _bf16, Normal(18, 2.0), rows=True, grad=True),
                _weight,
                InputSpec("temb", _fixed(TIMESTEPS, TIME_EMBED), _f32, Normal(7), rows=False, grad=True),
                InputSpec("wp", _fixed(2 * HIDDEN, TIME_EMBED), _bf16, Normal(23, TIME_EMBED**-0.5), False, True),
                InputSpec("bp", _fixed(2 * HIDDEN), _bf16, Normal(24, 0.02), rows=False, grad=True),
                InputSpec("idx", lambda n: (n,), _i64, TimestepIndex(), rows=True, grad=False),
            ),
        ),
        OpSpec(
            name="timestep_mlp",
            kind="gemm",
            summary="linear2(silu(linear1(x))), fp32 (TimestepEmbedding(256, 5376, out_dim=2688))",
            inputs=(
                InputSpec("x", _rows(FREQ_CHANNELS), _f32, Normal(2), rows=True, grad=True),
                InputSpec(
                    "w1", _fixed(TIME_MLP_HIDDEN, FREQ_CHANNELS), _f32, Normal(3, FREQ_CHANNELS**-0.5), False, True
                ),
                InputSpec("b1", _fixed(TIME_MLP_HIDDEN), _f32, Normal(4, 0.02), rows=False, grad=True),
                InputSpec(
                    "w2", _fixed(TIME_EMBED, TIME_MLP_HIDDEN), _f32, Normal(5, TIME_MLP_HIDDEN**-0.5), False, True
                ),
                InputSpec("b2", _fixed(TIME_EMBED), _f32, Normal(6, 0.02), rows=False, grad=True),
            ),
            out_shape=_rows(TIME_EMBED),
            out_dtype=_f32,
            cases=(1, 4, 64, 2048),
            cpu_cases=(1, 4, 64),
            references=("diffusers[plain]", "rl_kernel"),
        ),
        OpSpec(
            name="adaln_projection",
            kind="gemm",
            summary="linear(silu(temb).to(bf16), w, b), (T, 96768) bf16 (the block's AdaLN modulation)",
            inputs=(
                InputSpec("temb", _rows(TIME_EMBED), _f32, Normal(7), rows=True, grad=True),
                InputSpec("w", _fixed(ADALN_OUT, TIME_EMBED), _bf16, Normal(8, TIME_EMBED**-0.5), False, True),
                InputSpec("b", _fixed(ADALN_OUT), _bf16, Normal(9, 0.02), rows=False, grad=True),
            ),
            out_shape=_rows(ADALN_OUT),
            out_dtype=_bf16,
            cases=(1, 4, 64, 2048),
            cpu_cases=(1, 4),
            references=("diffusers[plain]", "rl_kernel"),
        ),
    )
}

GRAD_OUT_SALT = 99  # upstream gradient: Normal(99) with the case seed, in the output's dtype and shape


def get_op(name: str) -> OpSpec:
    """The op called ``name``; KeyError names the valid ones."""
    try:
        return OPS[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}; valid ops: {', '.join(OPS)}") from None
