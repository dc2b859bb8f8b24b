"""The project's own kernels (``rl_kernel_ops``): the second reference of every report.

On a CUDA device they are the CUDA kernels; on the CPU, the PyTorch implementation of the same
algorithm. ``source`` says which one ran. Each is prepared before it computes: on a GPU its CUDA
extension is built or loaded then (the process's ``build`` time), and a build that fails makes
the candidate unavailable with the compiler's reason.
"""

from __future__ import annotations

import torch

import rl_kernel_ops
from rl_kernel_ops import reference_gemm, sharded
from audit.core.candidates import candidate


TILE = 128  # the CUDA GEMM kernels' tile edge: every weight dimension is a multiple of it


def rl_kernel(*, ops: tuple[str, ...], source, **meta):
    """Register the decorated function as candidate ``rl_kernel`` of ``ops``, prepared by
    ``rl_kernel_ops.prepare``."""
    return candidate("rl_kernel", ops=ops, source=source, prepare=rl_kernel_ops.prepare, **meta)


def _source(op: str):
    return lambda mode, device: f"rl_kernel_ops.{op}: {rl_kernel_ops.backend_description(device)}"


def _gemm_accepts(check, args: tuple[str, ...], weights: tuple[str, ...]):
    """Shapes the GEMM kernels take: those their argument check passes on the inputs ``args`` (the
    reference's split counts) and, on a GPU, weights whose every dimension is a multiple of ``TILE``."""

    def accepts(meta: dict[str, torch.Tensor], device: torch.device) -> str | None:
        try:
            check(*(meta[name] for name in args))
        except ValueError as exc:
            return str(exc)
        odd = [(n, tuple(meta[n].shape)) for n in weights if any(d % TILE for d in meta[n].shape)]
        if device.type == "cuda" and odd:
            return f"the CUDA tiles need weight dimensions that are multiples of {TILE}; {odd[0][0]} is {odd[0][1]}"
        return None

    return accepts


@rl_kernel(ops=("norm_modulate",), source=_source("norm_modulate"), chunk_order={"sp_rows": sharded.norm_modulate})
def norm_modulate(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return rl_kernel_ops.norm_modulate(t["x"], t["w"], t["sh"], t["sc"], t["idx"])


@rl_kernel(ops=("gate_residual",), source=_source("gate_residual"), chunk_order={"sp_rows": sharded.gate_residual})
def gate_residual(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return rl_kernel_ops.gate_residual(t["res"], t["y"], t["gate"], t["idx"])


@rl_kernel(
    ops=("timestep_mlp",),
    source=_source("timestep_mlp"),
    accepts=_gemm_accepts(
        reference_gemm.check_timestep_mlp_args, ("x", "w1", "b1", "w2", "b2"), ("w1", "b1", "w2", "b2")
    ),
)
def timestep_mlp(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return rl_kernel_ops.timestep_mlp(t["x"], t["w1"], t["b1"], t["w2"], t["b2"])


@rl_kernel(
    ops=("adaln_projection",),
    source=_source("adaln_projection"),
    accepts=_gemm_accepts(reference_gemm.check_adaln_projection_args, ("temb", "w", "b"), ("w", "b")),
    chunk_order={"sp_rows": sharded.adaln_projection_rows, "tp_column": sharded.adaln_projection_columns},
)
def adaln_projection(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return rl_kernel_ops.adaln_projection(t["temb"], t["w"], t["b"])


@rl_kernel(ops=("gate_residual_norm_modulate",), source=_source("gate_residual + norm_modulate"))
def gate_residual_norm_modulate(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return rl_kernel_ops.gate_residual_norm_modulate(t["res"], t["y"], t["gate"], t["w"], t["sh"], t["sc"], t["idx"])


@rl_kernel(ops=("timestep_sinusoid",), source=_source("timestep_sinusoid"), grads=())
def timestep_sinusoid(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return rl_kernel_ops.timestep_sinusoid(t["t"])


@rl_kernel(
    ops=("final_adaln_out",),
    source=_source("adaln_projection + norm_modulate"),
    accepts=_gemm_accepts(reference_gemm.check_adaln_projection_args, ("temb", "wp", "bp"), ("wp", "bp")),
)
def final_adaln_out(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return rl_kernel_ops.final_adaln_out(t["x"], t["w"], t["temb"], t["wp"], t["bp"], t["idx"])
