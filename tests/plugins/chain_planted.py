"""Test doubles for the chain replay (loaded through $AUDIT_PLUGINS): gate_residual computed as
diffusers writes it, then changed on purpose. A real library kernel cannot be made to be off by
exactly one ULP, or nondeterministic, on demand.

- ``one_ulp_off``: the output's first element moved up by one ULP, every call (a stable drift);
- ``flaky_ulp``: one ULP added to a different element on each call (a nondeterministic kernel).
Both pass the upstream gradient through unchanged."""

import itertools

import torch

from audit.core.candidates import candidate

_calls = itertools.count()


class _BumpOneElement(torch.autograd.Function):
    @staticmethod
    def forward(ctx, out, position):
        bumped = out.clone()
        bumped.view(-1).view(torch.int16)[position % out.numel()] += 1  # bf16 bits: one ULP
        return bumped

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def _diffusers(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return t["res"] + t["gate"].index_select(0, t["idx"]) * t["y"]


@candidate("one_ulp_off", ops=("gate_residual",), source="test double: first output element one ULP up")
def one_ulp_off(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return _BumpOneElement.apply(_diffusers(t), 0)


@candidate("flaky_ulp", ops=("gate_residual",), source="test double: one ULP up at a different element per call")
def flaky_ulp(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return _BumpOneElement.apply(_diffusers(t), next(_calls))
