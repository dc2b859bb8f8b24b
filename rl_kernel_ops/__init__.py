"""rl_kernel_ops: the project's own deterministic, batch-invariant implementations of the MiniMax-H3
conditioning operators.

Each public function takes the op's tensors and returns its output; all are differentiable.
Tensors on a CUDA device run the CUDA kernels in ``csrc/`` (compiled on first use, see ``_build``);
tensors on the CPU run the PyTorch implementation of the same algorithm (``reference_rows``,
``reference_gemm``), which is also the oracle the CUDA kernels are tested against.

Contracts shared by every op, on either backend:
- deterministic: the same inputs give the same bits in the output and in every gradient;
- batch-invariant: a row's output and row-input gradients do not depend on the other rows;
- table and parameter gradients are fixed-order FP32 reductions, cast once.
The ops composed of others (``gate_residual_norm_modulate``, ``final_adaln_out``) keep these
contracts because their parts do and the composition only copies (a stack, a contiguous half);
``timestep_sinusoid`` has no gradient (``sinusoid``).
"""

from __future__ import annotations

from types import ModuleType

import torch

__all__ = [
    "adaln_projection",
    "adaln_row_gather",
    "backend_description",
    "final_adaln_out",
    "gate_residual",
    "gate_residual_norm_modulate",
    "gate_residual_partials",
    "norm_modulate",
    "norm_modulate_partials",
    "prepare",
    "timestep_mlp",
    "timestep_sinusoid",
]


def _rows_backend(t: torch.Tensor) -> ModuleType:
    if t.is_cuda:
        from . import cuda_rows

        return cuda_rows
    from . import reference_rows

    return reference_rows


def gemm_backend(t: torch.Tensor) -> ModuleType:
    """The module computing the GEMM ops for tensors on ``t``'s device: ``cuda_gemm`` (the kernels)
    or ``reference_gemm`` (the oracle); both have the same functions and summation orders."""
    if t.is_cuda:
        from . import cuda_gemm

        return cuda_gemm
    from . import reference_gemm

    return reference_gemm


def prepare(device: torch.device | str) -> None:
    """Build (where its sources changed since the last build) and load the CUDA extension when
    ``device`` is a CUDA device, so that the first op call does not pay for it; nothing on the CPU.
    Raises RuntimeError as ``_build``."""
    if torch.device(device).type == "cuda":
        from . import _build

        _build.load_extension()


def backend_description(device: torch.device | str) -> str:
    """Which implementation runs for tensors on ``device``: used in report ``source`` strings."""
    if torch.device(device).type == "cuda":
        return "CUDA kernels (rl_kernel_ops/csrc, sm_90a)"
    return "PyTorch oracle of the kernels' algorithm on the CPU, not the CUDA kernels (CPU results are not GPU results)"


def norm_modulate(x, w, shift, scale, idx, eps: float = 1e-5):
    """rmsnorm(x, w) * (1 + scale[idx]) + shift[idx]; x (S, H) bf16, tables (R, H) bf16, idx (S,) int64."""
    return _rows_backend(x).norm_modulate(x, w, shift, scale, idx, eps)


def gate_residual(res, y, gate, idx):
    """res + gate[idx] * y; res, y (S, H) bf16, gate (R, H) bf16, idx (S,) int64."""
    return _rows_backend(res).gate_residual(res, y, gate, idx)


def norm_modulate_partials(x, w, shift, scale, idx, grad, eps: float = 1e-5):
    """The tile partials of norm_modulate's d_shift, d_scale and dw terms before their fold, and each
    tile's table row (``reference_rows.norm_modulate_partials``)."""
    return _rows_backend(x).norm_modulate_partials(x, w, shift, scale, idx, grad, eps)


def gate_residual_partials(res, y, gate, idx, grad):
    """The tile partials of gate_residual's d_gate before their fold, and each tile's table row."""
    return _rows_backend(res).gate_residual_partials(res, y, gate, idx, grad)


def adaln_row_gather(table, idx):
    """table[idx]: a pure copy forward; backward a fixed-order segmented FP32 sum per table row."""
    return _rows_backend(table).adaln_row_gather(table, idx)


def timestep_mlp(x, w1, b1, w2, b2):
    """linear(silu(linear(x, w1, b1)), w2, b2) in FP32 with a row-count-independent summation order."""
    return gemm_backend(x).timestep_mlp(x, w1, b1, w2, b2)


def adaln_projection(temb, w, b):
    """linear(silu(temb).to(bf16), w, b): BF16 inputs, FP32 accumulation, row-count-independent order."""
    return gemm_backend(temb).adaln_projection(temb, w, b)


def gate_residual_norm_modulate(res, y, gate, w, shift, scale, idx, eps: float = 1e-5):
    """h1 = gate_residual(res, y, gate, idx), then norm_modulate(h1, w, shift, scale, idx, eps);
    both stacked as (S, 2, H) bf16. h1's gradient is the sum of the two outputs' contributions,
    as autograd forms it for the block's own expression."""
    h1 = gate_residual(res, y, gate, idx)
    return torch.stack((h1, norm_modulate(h1, w, shift, scale, idx, eps)), dim=1)


def final_adaln_out(x, w, temb, wp, bp, idx, eps: float = 1e-5):
    """adaln_projection(temb, wp, bp) split into shift then scale (contiguous copies), then
    norm_modulate(x, w, shift, scale, idx, eps) with idx indexing timesteps: ``norm_out``."""
    shift, scale = (half.contiguous() for half in adaln_projection(temb, wp, bp).chunk(2, dim=-1))
    return norm_modulate(x, w, shift, scale, idx, eps)


def timestep_sinusoid(t, dim: int = 256, max_period: float = 10000.0):
    """[cos(t * f), sin(t * f)] in FP32, (T,) -> (T, dim); see ``sinusoid`` for what it equals."""
    from .sinusoid import timestep_sinusoid as sinusoid

    return sinusoid(t, dim, max_period)
