"""Test doubles for the chain replay (loaded through $AUDIT_PLUGINS): gate_residual (and
gate_residual_norm_modulate) computed as diffusers writes it, then changed on purpose. A real
library kernel cannot be made to be off by exactly one ULP, or nondeterministic, on demand.

- ``one_ulp_off``: the output's first element moved up by one ULP, every call (a stable drift);
- ``flaky_ulp``: one ULP added to a different element on each call (a nondeterministic kernel);
- ``n2_one_ulp_off`` (gate_residual_norm_modulate, diffusers' expressions for both halves): the
  first element of the n2 half moved up by one ULP, every call; h1 untouched.
All pass the upstream gradient through unchanged."""

import itertools

import torch

from audit.core.candidates import candidate
from audit.core.ops import EPS

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


@candidate("n2_one_ulp_off", ops=("gate_residual_norm_modulate",), source="test double: n2's first element one ULP up")
def n2_one_ulp_off(t: dict[str, torch.Tensor]) -> torch.Tensor:
    h1 = _diffusers(t)
    normed = torch.nn.functional.rms_norm(h1, (h1.shape[-1],), t["w"], EPS)  # nn.RMSNorm's forward
    n2 = normed * (1.0 + t["sc"].index_select(0, t["idx"])) + t["sh"].index_select(0, t["idx"])
    return torch.stack((h1, _BumpOneElement.apply(n2, 0)), dim=1)
