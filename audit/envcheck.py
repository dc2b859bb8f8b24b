"""Which modes and candidates can run in this interpreter: ``availability(device)`` is
``{"modes": {mode: reason or null}, "candidates": {op: {name: reason or null}}}``. The probe of a
named environment (``audit.environments.probe``) calls it there, with this repository on
``PYTHONPATH``; it needs only torch, like the worker."""

from __future__ import annotations

import torch

from modes import MODES

from .candidates import candidates_for, error_text, unavailable_reason
from .ops import OPS


def _mode_problem(mode) -> str | None:
    try:
        return mode.problem()
    except Exception as exc:  # an adapter that cannot even be asked is itself the reason
        return error_text(exc)


def availability(device: torch.device) -> dict:
    return {
        "modes": {m.name: _mode_problem(m) for m in MODES.values()},
        "candidates": {op: {c.name: unavailable_reason(c, device) for c in candidates_for(op)} for op in OPS},
    }
