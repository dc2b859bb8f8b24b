"""PyTorch's own RMSNorm, without modulation: shows which half of norm_modulate is invariant.

Its output is the normalised row only, so it is compared with the references' modulated output
and is expected to differ there; its x and w gradients are the meaningful comparison.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from audit.core.candidates import candidate

from audit.core.packages import version
from audit.core.ops import EPS, HIDDEN


@candidate(
    "torch_rms_norm",
    ops=("norm_modulate",),
    source=lambda mode, device: f"torch {version('torch')} F.rms_norm (no modulation)",
    grads=("x", "w"),
    computes="torch_rms_norm",
)
def torch_rms_norm(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return F.rms_norm(t["x"], (HIDDEN,), t["w"], EPS)
