"""Test doubles for the batch-invariance verdict (loaded through $AUDIT_PLUGINS or imported):
an RMSNorm whose reduction order depends on the batch size, and the same with a fixed order."""

import torch

from audit.core.candidates import candidate
from audit.core.ops import EPS, HIDDEN


def _rms_norm(x: torch.Tensor, w: torch.Tensor, pieces: int) -> torch.Tensor:
    xf = x.float()
    # each piece's partial sum is rounded to bf16, so the number of pieces shows in the bits
    partial = xf.pow(2).reshape(x.shape[0], pieces, HIDDEN // pieces).sum(-1).to(torch.bfloat16).float()
    ms = partial.sum(-1, keepdim=True) / HIDDEN
    return (xf * torch.rsqrt(ms + EPS) * w.float()).to(x.dtype)


@candidate(
    "order_follows_batch",
    ops=("norm_modulate",),
    source="test double: sum order depends on the batch size",
    grads=("x", "w"),
    computes="torch_rms_norm",
)
def order_follows_batch(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return _rms_norm(t["x"], t["w"], pieces=2 if t["x"].shape[0] % 2 else 7)


@candidate(
    "fixed_order",
    ops=("norm_modulate",),
    source="test double: fixed sum order",
    grads=("x", "w"),
    computes="torch_rms_norm",
)
def fixed_order(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return _rms_norm(t["x"], t["w"], pieces=7)
