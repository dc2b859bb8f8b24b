"""timestep_sinusoid on both backends: ``[cos(t * f), sin(t * f)]`` with ``f_j = exp((c * j) / half)``,
``c = -ln(max_period)``, every step in FP32 (diffusers' ``get_timestep_embedding`` with
``flip_sin_to_cos=True``, ``downscale_freq_shift=0``, ``scale=1``).

- CUDA: ``csrc/timestep_sinusoid.cu``, bitwise eager torch's expression on the same GPU (the CUDA
  math library's expf/cosf/sinf, each product rounded on its own).
- CPU: that expression in eager torch, which on the CPU evaluates exp, cos and sin with its own
  vectorised functions: CPU bits are not GPU bits.
Each output row depends on its own timestep only (batch-invariant), and the same inputs give the
same bits. No gradient: timesteps are data, which neither the trainer nor the rollout differentiates.
"""

from __future__ import annotations

import math

import torch

from ._checks import require_tensor


def check_sinusoid(t, dim: int, max_period: float) -> None:
    require_tensor("t", t, torch.float32, 1)
    if not isinstance(dim, int) or isinstance(dim, bool) or dim < 2 or dim % 2:
        raise ValueError(f"dim must be a positive even int, got {dim!r}")
    if not max_period > 1:
        raise ValueError(f"max_period must be greater than 1, got {max_period!r}")


def timestep_sinusoid(t: torch.Tensor, dim: int = 256, max_period: float = 10000.0) -> torch.Tensor:
    check_sinusoid(t, dim, max_period)
    c = -math.log(max_period)
    if t.is_cuda:
        from ._build import load_extension

        load_extension()
        return torch.ops.rl_kernel_ops.timestep_sinusoid(t.detach().contiguous(), dim, c)
    half = dim // 2
    freqs = torch.exp(c * torch.arange(half, dtype=torch.float32) / half)
    angles = t.detach()[:, None] * freqs[None, :]
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)
