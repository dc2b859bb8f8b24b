"""Test double for the trajectory (loaded through $AUDIT_PLUGINS): ``ulp_at_step`` serves
``norm_out`` (its ``adaln_projection`` and ``norm_modulate`` parts) with the expressions of
diffusers' ``MiniMaxH3AdaLayerNormOut`` (so bitwise the provider's, at any hidden size), except that
at one step the velocity's first element is moved up by one ULP. The step is ``$PLANTED_STEP`` of
``$PLANTED_STEPS`` (-1: none): the loop calls the stage once per step, every run from step 0, so
call k is step k mod ``$PLANTED_STEPS``."""

import itertools
import os

import torch

from audit.core.candidates import candidate
from audit.core.ops import EPS

_calls = itertools.count()


@candidate("ulp_at_step", ops=("adaln_projection",), source="test double: diffusers' norm_out projection")
def projection(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.nn.functional.linear(torch.nn.functional.silu(t["temb"]).to(t["w"].dtype), t["w"], t["b"])


@candidate("ulp_at_step", ops=("norm_modulate",), source="test double: diffusers' modulation, one ULP up at one step")
def modulation(t: dict[str, torch.Tensor]) -> torch.Tensor:
    normed = torch.nn.functional.rms_norm(t["x"], (t["x"].shape[-1],), t["w"], EPS)
    out = normed * (1.0 + t["sc"].index_select(0, t["idx"])) + t["sh"].index_select(0, t["idx"])
    if next(_calls) % int(os.environ["PLANTED_STEPS"]) == int(os.environ["PLANTED_STEP"]):
        out.view(-1).view(torch.int16)[0] += 1  # bf16 bits: one ULP
    return out
