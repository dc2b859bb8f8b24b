"""Which modes and candidates can run in this interpreter: ``python -m audit.envcheck DEVICE``
prints one JSON line ``{"modes": {mode: reason or null}, "candidates": {op: {name: reason or
null}}}``. The parent runs it in each named environment (``audit list``, ``audit env check``), with
this repository on ``PYTHONPATH``; it needs only torch there, like the worker."""

from __future__ import annotations

import json
import sys

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


if __name__ == "__main__":
    print(json.dumps(availability(torch.device(sys.argv[1]))))
