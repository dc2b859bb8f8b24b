"""The argument check every op's validation starts with (both backends, all ops), and the layout
every CUDA kernel reads its upstream gradient in."""

from __future__ import annotations

import torch


def require_tensor(name: str, t: object, dtype: torch.dtype, dim: int) -> torch.Tensor:
    """``t`` itself when it is a tensor of ``dtype`` with ``dim`` dimensions; TypeError for a wrong
    type or dtype, ValueError for a wrong number of dimensions."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != dtype:
        raise TypeError(f"{name} must be {dtype}, got {t.dtype}")
    if t.dim() != dim:
        raise ValueError(f"{name} must have {dim} dimension(s), got shape {tuple(t.shape)}")
    return t


def kernel_layout(t: torch.Tensor) -> torch.Tensor:
    """``t`` as the CUDA kernels read it (16-byte vectors): contiguous and 16-byte aligned, copied
    only when it is not already."""
    t = t.contiguous()
    return t if t.data_ptr() % 16 == 0 else t.clone()
