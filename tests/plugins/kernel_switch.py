"""Test double for kernel fingerprints (loaded through $AUDIT_PLUGINS): gate_residual computed by
one of two sets of aten ops, chosen by $KERNEL_SWITCH_IMPL, that give the same bits.

- ``add`` (the default): ``res + gate[idx] * y``: ``aten::mul`` then ``aten::add``, as diffusers;
- ``sub_neg``: ``res - (-(gate[idx] * y))``: ``aten::mul``, ``aten::neg``, ``aten::sub``.

Negation is exact and ``a - (-b)`` is ``a + b`` in IEEE arithmetic (the sum of two BF16 values is
rounded once either way), so outputs and gradients are bitwise equal while the forward and the
backward run different operators (``AddBackward0`` vs ``SubBackward0`` and ``NegBackward0``): what
a dispatch change under unchanged versions looks like."""

import os

import torch

from audit.core.candidates import candidate

IMPL_ENV = "KERNEL_SWITCH_IMPL"


@candidate(
    "kernel_switch",
    ops=("gate_residual",),
    source=lambda mode, device: f"test double: res + gate[idx]*y by {os.environ.get(IMPL_ENV, 'add')}",
)
def kernel_switch(t: dict[str, torch.Tensor]) -> torch.Tensor:
    gated = t["gate"].index_select(0, t["idx"]) * t["y"]
    if os.environ.get(IMPL_ENV, "add") == "sub_neg":
        return t["res"] - (-gated)
    return t["res"] + gated
