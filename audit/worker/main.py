"""The mode worker: runs one op's candidates under one mode and reports what it finds.

Started by the runner through ``audit.parent.launch`` as ``python -m audit.worker.main JOB.json``
with the mode's variables already set, so they are in place before torch initialises CUDA. It
turns TF32 off, switches the mode on, reports its dispatch switches (``audit.core.dispatch``) and
which candidates cannot run here and why, then runs the job's ``work`` (``audit.worker.bitwise``
or ``audit.worker.prior_art``), which waits for its turn (``audit.worker.await_turn``) before it
moves inputs to the device and computes. Everything goes to the runner as events
(``audit.core.events``) on the file descriptor the job names; a candidate that raises loses only
its unit, and a crash of the whole process is handled by the runner. The last event, ``Finished``
or ``Crashed``, carries the time the process spent in each phase (``audit.core.timing``).
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path

import torch

from audit.core.availability import interpreter
from audit.core.candidates import Candidate, get_candidate, load_adapters, unavailable_reason
from audit.core.dispatch import switches
from audit.core.events import (
    Crashed,
    Dispatch,
    Emit,
    Finished,
    Interpreter,
    Job,
    ModeOn,
    ModeUnavailable,
    Source,
    Unavailable,
    encode,
)
from audit.core.ops import get_op
from audit.core.packages import error_text
from audit.core.timing import phase, spent
from audit.worker import STARTED, hold_turn, leave
from modes import get_mode


def main(job_path: str) -> int:
    """Run the job; anything raised past the candidates is sent as ``Crashed`` (so the runner can
    say which exception ended the process) and raised again."""
    imported = time.time()
    job = Job.from_json(Path(job_path).read_text())
    events = os.fdopen(job.events_fd, "w", buffering=1)
    hold_turn(job.turn_fd)

    def emit(event) -> None:
        events.write(encode(event) + "\n")

    def phases() -> dict[str, float]:
        now = spent()
        return {"start": STARTED - job.spawned, **now, "imports": now["imports"] + imported - STARTED}

    try:
        with phase("setup"):
            run_job(job, emit)
        emit(Finished(phases()))
        return 0
    except BaseException as exc:
        emit(Crashed(error_text(exc), phases()))
        raise


def run_job(job: Job, emit: Emit) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    with phase("imports"):
        load_adapters()
    op, mode, device = get_op(job.op), get_mode(job.mode), torch.device(job.device)
    emit(Interpreter(interpreter()))
    try:
        description = mode.call("enable")
    except Exception as exc:
        emit(ModeUnavailable(f"mode {mode.name} cannot be switched on: {error_text(exc)}"))
        return
    emit(ModeOn(description, torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32))
    emit(Dispatch(switches(mode, device)))

    runnable: list[tuple[str, Candidate]] = []
    for name in job.candidates:
        c = get_candidate(op.name, name)
        report_name = c.report_name(mode.name)
        with phase("imports"):  # the libraries the candidate requires are imported to check them
            problem = unavailable_reason(c, device)
        if problem is None and c.prepare is not None:
            try:
                with phase("build"):
                    c.prepare(device)
            except Exception as exc:
                problem = f"prepare: {error_text(exc)}"
        if problem is None:
            try:
                emit(Source(report_name, c.source(mode.name, device)))
                runnable.append((report_name, c))
                continue
            except Exception as exc:
                problem = f"source: {error_text(exc)}"
        emit(Unavailable(report_name, problem))

    module, _, function = job.work.partition(":")
    getattr(importlib.import_module(module), function)(job, op, mode, device, runnable, emit)


if __name__ == "__main__":
    leave(main(sys.argv[1]))
