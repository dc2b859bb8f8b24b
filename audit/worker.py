"""The mode subprocess: runs one op's candidates under one mode and reports what it finds.

Started by the runner as ``python -m audit.worker JOB.json`` with the mode's environment already
set, so the mode's variables are in place before torch initialises CUDA. It turns TF32 off,
switches the mode on, reports which candidates cannot run here and why, then runs the job's task
(``audit.tasks``: ``bitwise`` or ``prior_art``). Everything goes to the runner as JSON lines on
the file descriptor named in the job; a candidate that raises loses only its case, and a crash of
the whole process is handled by the runner.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

from modes import get_mode

from .candidates import Candidate, error_text, get_candidate, unavailable_reason
from .environment import interpreter
from .ops import get_op
from .tasks import TASKS


def main(job_path: str) -> int:
    """Run the job; anything raised past the candidates is sent as a ``crashed`` event (so the
    runner can say which exception ended the process) and raised again."""
    job = json.loads(Path(job_path).read_text())
    events = os.fdopen(job["events_fd"], "w", buffering=1)

    def emit(event: str, **fields) -> None:
        events.write(json.dumps({"event": event, **fields}) + "\n")

    try:
        return run_job(job, emit)
    except BaseException as exc:
        emit("crashed", reason=error_text(exc))
        raise


def run_job(job: dict, emit) -> int:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    op, mode, device = get_op(job["op"]), get_mode(job["mode"]), torch.device(job["device"])
    emit("interpreter", info=interpreter())
    try:
        description = mode.call("enable")
    except Exception as exc:
        emit("mode_unavailable", reason=f"mode {mode.name} cannot be switched on: {error_text(exc)}")
        return 0
    tf32 = torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32
    emit("mode", description=description, tf32=tf32)

    runnable: list[tuple[str, Candidate]] = []
    for name in job["candidates"]:
        c = get_candidate(op.name, name)
        report_name = c.report_name(mode.name)
        problem = unavailable_reason(c, device)
        if problem is None:
            try:
                emit("source", candidate=report_name, source=c.source(mode.name, device))
                runnable.append((report_name, c))
                continue
            except Exception as exc:
                problem = f"source: {error_text(exc)}"
        emit("unavailable", candidate=report_name, reason=problem)

    TASKS[job["task"]].work(job, op, mode, device, runnable, emit)
    emit("finished")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
