"""The project's own kernels (``rl_kernel_ops``): the second reference of every report.

On a CUDA device they are the CUDA kernels; on the CPU, the PyTorch implementation of the same
algorithm. ``source`` says which one ran.
"""

from __future__ import annotations

import torch

import rl_kernel_ops
from audit.candidates import candidate


def _source(op: str):
    return lambda mode, device: f"rl_kernel_ops.{op}: {rl_kernel_ops.backend_description(device)}"


@candidate("rl_kernel", ops=("norm_modulate",), source=_source("norm_modulate"))
def norm_modulate(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return rl_kernel_ops.norm_modulate(t["x"], t["w"], t["sh"], t["sc"], t["idx"])


@candidate("rl_kernel", ops=("gate_residual",), source=_source("gate_residual"))
def gate_residual(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return rl_kernel_ops.gate_residual(t["res"], t["y"], t["gate"], t["idx"])


@candidate("rl_kernel", ops=("timestep_mlp",), source=_source("timestep_mlp"))
def timestep_mlp(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return rl_kernel_ops.timestep_mlp(t["x"], t["w1"], t["b1"], t["w2"], t["b2"])


@candidate("rl_kernel", ops=("adaln_projection",), source=_source("adaln_projection"))
def adaln_projection(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return rl_kernel_ops.adaln_projection(t["temb"], t["w"], t["b"])
