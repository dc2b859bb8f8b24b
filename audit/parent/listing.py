"""What ``audit list`` shows: every op, every candidate and every mode, each with why it cannot run
here (None when it can). A mode mapped to another Python environment is judged by one probe of
that environment (kept for the run by ``audit.parent.interpreters``); everything else in this interpreter."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from modes import MODES

from audit.core.availability import mode_problem
from audit.core.candidates import candidates_for, unavailable_reason
from audit.parent.interpreters import Environments, check
from audit.core.ops import OPS


@dataclass(frozen=True)
class CandidateLine:
    op: str
    name: str
    modes: str  # "all" or the one mode it runs in
    grads: str  # the gradients it computes, or "none (forward only)"
    unavailable: str | None


@dataclass(frozen=True)
class ModeLine:
    name: str
    variables: dict[str, str]
    summary: str
    runs_in: str  # "this interpreter" or "ENV (PYTHON)"
    unavailable: str | None


def candidate_lines(device: torch.device) -> list[CandidateLine]:
    """Every registered candidate of every op, judged for ``device`` in this interpreter."""
    lines = []
    for spec in OPS.values():
        for c in candidates_for(spec.name):
            grads = ", ".join(spec.grads if c.grads is None else c.grads) or "none (forward only)"
            lines.append(
                CandidateLine(spec.name, c.name, "all" if c.all_modes else c.mode, grads, unavailable_reason(c, device))
            )
    return lines


def mode_lines(device: torch.device, envs: Environments, *, timeout: float) -> list[ModeLine]:
    """Every mode, judged where it would run: here, or in the environment ``envs`` maps it to."""
    lines = []
    for m in MODES.values():
        env_name, python = envs.python_for(m.name)
        if env_name is None:
            where, reason = "this interpreter", mode_problem(m)
        else:
            found = check(python, device.type, timeout=timeout)
            where = f"{env_name} ({python})"
            reason = found.get("problem") or found["availability"]["modes"].get(m.name)
        lines.append(ModeLine(m.name, dict(m.env), m.summary, where, reason))
    return lines
