"""Where a mode worker process's time goes: the ``timing`` block of the bitwise and prior-art reports.

Each phase is wall time spent in it, exclusive: a phase entered inside another pauses the outer one,
so the phases of a process never count a second twice. In the order a process meets them:

- ``start``: from the runner spawning the process to the worker package's first statement;
- ``imports``: the worker's module imports (torch), the adapters, and the libraries each candidate
  requires (imported to check that it can run: diffusers alone takes about 2 s on a CPU);
- ``setup``: switching the mode on, the dispatch switches, the candidates' availability and
  sources, and whatever the work loop does outside the phases below (events, bookkeeping);
- ``build``: the candidates' ``prepare`` (rl_kernel: building or loading its CUDA extension);
- ``inputs``: drawing each unit's inputs, fingerprinting them, moving them to the device;
- ``waiting``: a worker started ahead of its turn (``audit.parent.runner.Runner``) waiting for it;
- ``compute``: the candidates' evaluations, repeats included (a library's first-call JIT compile too);
- ``comparison``: comparing bits, and reading back the references' tensors other modes wrote;
- ``writing``: writing the references' tensors for the other modes' processes;
- ``kernels``: the profiled evaluations of the kernel fingerprints;
- ``exit``: from the worker's last event to the process's end (measured by the runner).

The worker measures ``imports`` (from its first statement; loading the adapters is counted with
``phase`` too) to ``kernels`` (``spent``); the runner adds ``start`` and ``exit`` and the process's
wall time, from spawn to reaping, which the phases add up to.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

PHASES = (
    "start",
    "imports",
    "setup",
    "build",
    "inputs",
    "waiting",
    "compute",
    "comparison",
    "writing",
    "kernels",
    "exit",
)
WORKER_PHASES = PHASES[1:-1]  # measured in the worker

_spent = dict.fromkeys(WORKER_PHASES, 0.0)
_open: list[list] = []  # [phase, since] of the phases entered and not left, innermost last


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Count the wall time inside the block to ``name``, except the time of phases entered in it."""
    now = time.perf_counter()
    if _open:
        outer = _open[-1]
        _spent[outer[0]] += now - outer[1]
    _open.append([name, now])
    try:
        yield
    finally:
        end = time.perf_counter()
        _spent[name] += end - _open.pop()[1]
        if _open:
            _open[-1][1] = end


def spent() -> dict[str, float]:
    """The seconds this process has spent in each phase so far, the open ones up to now."""
    out = dict(_spent)
    if _open:
        out[_open[-1][0]] += time.perf_counter() - _open[-1][1]
    return out
