"""What this interpreter holds and can run. ``availability(device)`` is ``{"modes": {mode: reason
or null}, "candidates": {op: {name: reason or null}}}``; ``interpreter()`` is this interpreter's
path, Python, torch, CUDA and the compared libraries' versions. A mode's worker reports
``interpreter()``, and the probe of a named environment (``audit.parent.interpreters.probe``) calls
both there, with this repository on ``PYTHONPATH``; they need only torch, like the worker."""

from __future__ import annotations

import importlib
import platform
import sys

import torch

from audit.core.candidates import candidates_for, unavailable_reason
from audit.core.ops import OPS
from audit.core.packages import LIBRARIES, error_text, import_problem, version
from modes import MODES, Mode


def mode_problem(mode: Mode) -> str | None:
    """Why ``mode`` cannot run here, judged by importing what it needs without switching it on
    (None when nothing is missing; ``enable`` may still refuse, with its own reason). An adapter
    that knows better (e.g. where a source tree replaces the package) provides
    ``mode_problem(mode)`` beside its ``enable``; an adapter that cannot even be asked is itself
    the reason."""
    try:
        if mode.enable:
            adapter = importlib.import_module(mode.enable.partition(":")[0])
            if hasattr(adapter, "mode_problem"):
                return adapter.mode_problem(mode)
        return next((p for p in map(import_problem, mode.requires) if p), None)
    except Exception as exc:
        return error_text(exc)


def availability(device: torch.device) -> dict:
    return {
        "modes": {m.name: mode_problem(m) for m in MODES.values()},
        "candidates": {op: {c.name: unavailable_reason(c, device) for c in candidates_for(op)} for op in OPS},
    }


def interpreter() -> dict:
    """This interpreter: its path, Python, torch and CUDA versions, and the compared libraries'
    versions it sees (a mode's worker reports this, so the report says what each mode really ran)."""
    return {
        "python": sys.executable,
        "python_version": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "libraries": {name: version(name) for name in LIBRARIES},
    }
