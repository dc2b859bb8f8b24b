"""Test double for repeatability (loaded through $AUDIT_PLUGINS): gate_residual computed as
diffusers does, except that its backward adds one ULP to a different element of the gate gradient
on each call, as a kernel that accumulates with atomics in a varying order would. A real
nondeterministic library kernel cannot be had on a CPU."""

import itertools

import torch

from audit.core.candidates import candidate

_calls = itertools.count()


class _OneUlpOff(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate):
        return gate.view_as(gate)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone()
        flat = grad.view(-1).view(torch.int16)  # bf16 bits
        flat[next(_calls) % flat.numel()] += 1
        return grad


@candidate(
    "flaky_gate_grad", ops=("gate_residual",), source="test double: one ULP added to a varying d_gate element per call"
)
def flaky_gate_grad(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return t["res"] + _OneUlpOff.apply(t["gate"]).index_select(0, t["idx"]) * t["y"]
