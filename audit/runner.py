"""The runner: runs each mode of a plan in its own subprocess and collects what they report.

Plain mode runs first: in the bitwise task it computes the references and keeps their tensors on
disk in a temporary directory for the other modes' processes; the directory is removed when the op
is done. A mode process that crashes, runs out of memory or times out does not end the run: the
candidate it was running becomes ``{"unavailable": "<exit status and last output lines>"}`` and
the process is started again for the candidates it had not finished.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from modes import Mode, get_mode
from modes.environment import mode_environment

from .candidates import Candidate, bounded, candidates_for
from .environments import Environments, probe, worker_path
from .ops import OpSpec
from .tasks import TASKS, Task

STDERR_TAIL = 12
EXIT_GRACE_S = 30.0  # how long a worker that closed its event pipe may take to exit before it is killed
Advance = Callable[[str], None]


@dataclass
class Plan:
    """Which candidates run in which mode for one op, over which units of work: the cases of the
    bitwise task, or the checks of the prior-art task."""

    op: OpSpec
    task: Task
    units: list
    device: torch.device
    by_mode: dict[str, list[Candidate]]
    options: dict = field(default_factory=dict)  # task-specific job fields
    inherit_env: tuple[str, ...] = ()  # numerics variables the mode processes keep from this shell
    environments: Environments = field(default_factory=Environments)  # the interpreter of each mode

    @property
    def total(self) -> int:
        return len(self.units) * sum(len(cs) for cs in self.by_mode.values())


def plan(
    op: OpSpec,
    task_name: str,
    modes: list[str],
    names: list[str] | None,
    units: list,
    device: torch.device,
    inherit_env: tuple[str, ...] = (),
    environments: Environments | None = None,
    **options,
) -> Plan:
    """Candidates per mode, references first, for the task named ``task_name`` (``TASKS``);
    ``names`` filters by candidate or report name, but a task that needs the references always
    runs them. ``inherit_env`` names the numerics variables the mode processes keep from this shell."""
    task = TASKS[task_name]
    by_mode: dict[str, list[Candidate]] = {}
    ordered = sorted(candidates_for(op.name), key=lambda c: c.report_name("plain") not in op.references)
    for mode in sorted(modes, key=lambda m: m != "plain"):
        chosen = [
            c
            for c in ordered
            if c.runs_in(mode)
            and (
                names is None
                or c.name in names
                or c.report_name(mode) in names
                or (task.needs_references and c.report_name(mode) in op.references)
            )
        ]
        if chosen:
            by_mode[mode] = chosen
    return Plan(op, task, units, device, by_mode, options, tuple(inherit_env), environments or Environments())


@dataclass
class Outcome:
    """What the mode processes reported, accumulated across restarts."""

    results: dict[str, dict] = field(default_factory=dict)  # report name -> entry
    modes: dict[str, dict] = field(default_factory=dict)  # mode -> {"unavailable": ...} or {"description": ...}
    fingerprints: dict[str, dict[str, str]] = field(default_factory=dict)  # mode -> case -> sha256
    environments: dict[str, dict[str, str]] = field(default_factory=dict)  # mode -> its numerics variables
    interpreters: dict[str, dict] = field(default_factory=dict)  # mode -> the interpreter its worker reported
    tf32: bool = False
    done: set[tuple[str, object]] = field(default_factory=set)  # (report name, unit)

    def entry(self, name: str) -> dict:
        return self.results.setdefault(name, {})

    def unavailable(self, name: str, reason: str) -> None:
        self.results[name] = {"unavailable": reason}

    def finished(self, name: str, units: list) -> bool:
        return all((name, u) in self.done for u in units)


def _spawn(job: dict, workdir: Path, env: dict[str, str], python: str) -> tuple[subprocess.Popen, int, Path]:
    read_fd, write_fd = os.pipe()
    job = dict(job, events_fd=write_fd)
    job_path = workdir / f"job-{job['mode']}-{time.monotonic_ns()}.json"
    job_path.write_text(json.dumps(job))
    log_path = job_path.with_suffix(".log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [python, "-m", "audit.worker", str(job_path)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            pass_fds=(write_fd,),
            cwd=Path(__file__).resolve().parent.parent,
        )
    os.close(write_fd)
    return proc, read_fd, log_path


def _events(proc: subprocess.Popen, read_fd: int, deadline: float):
    """Yield the worker's events until it closes the pipe; stop (and kill it) at the deadline."""
    buffer = b""
    with os.fdopen(read_fd, "rb", buffering=0) as pipe:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                proc.kill()
                yield {"event": "timeout"}
                return
            ready, _, _ = select.select([pipe], [], [], min(remaining, 1.0))
            if not ready:
                continue
            chunk = pipe.read(65536)
            if not chunk:
                return
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    yield json.loads(line)


def log_tail(log_path: Path) -> str:
    """The last lines the process printed, bounded (see ``bounded``)."""
    with open(log_path, "rb") as log:
        log.seek(max(0, log.seek(0, os.SEEK_END) - 16 * 4096))
        text = log.read().decode(errors="replace")
    return bounded("\n".join(deque(text.splitlines(), maxlen=STDERR_TAIL)))


def _wait_for_exit(proc: subprocess.Popen) -> tuple[int, bool]:
    """(exit status, whether it had to be killed): a worker that closed its pipe gets EXIT_GRACE_S
    to exit on its own, so its real status is reported, not the kill's."""
    try:
        return proc.wait(timeout=EXIT_GRACE_S), False
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(), True


def _how_it_ended(code: int, raised: str | None, lingered: bool) -> str:
    """``exited with status 1 after raising KeyError: 'x'``, ``was killed by SIGKILL``, ..."""
    if lingered:
        return f"closed its event pipe but had not exited {EXIT_GRACE_S:.0f} s later, so it was killed"
    if code < 0:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    else:
        how = f"exited with status {code}"
    return f"{how} after raising {raised}" if raised else how


@dataclass
class _Process:
    """What one worker process said before it ended."""

    current: tuple[str | None, object] | None = None  # (candidate, unit) running; candidate None: drawing inputs
    finished: bool = False  # it reported that every unit was done
    timed_out: bool = False
    raised: str | None = None  # the exception that ended it, as it reported it


class _ModeRun:
    """One mode's candidates, run in as many processes as it takes (see ``run_mode``)."""

    def __init__(self, p: Plan, mode: Mode, outcome: Outcome, advance: Advance, env_name: str | None):
        self.p, self.mode, self.outcome, self.advance = p, mode, outcome, advance
        self.env_name = env_name  # the environment its worker runs in (None: this one)
        self.names = {c.report_name(mode.name): c for c in p.by_mode[mode.name]}
        self.pending = list(self.names)
        self.stalls = 0  # processes in a row that died without finishing anything

    def give_up(self, name: str, reason: str) -> None:
        """``name`` is unavailable for every unit it has not finished; a reason it already has stays."""
        if "unavailable" not in self.outcome.results.get(name, {}):
            self.outcome.unavailable(name, reason)
        for u in self.p.units:
            if (name, u) not in self.outcome.done:
                self.outcome.done.add((name, u))
                self.advance(name)

    def give_up_all(self, reason: str) -> None:
        for name in self.pending:
            self.give_up(name, reason)
        self.pending = []

    def record_done(self, ev: dict) -> None:
        self.p.task.record(self.p, self.outcome, ev)
        key = (ev["candidate"], ev["unit"])
        if key not in self.outcome.done and ev["candidate"] in self.pending:
            self.outcome.done.add(key)
            self.advance(ev["candidate"])

    def job(self, workdir: Path) -> dict:
        p = self.p
        return {
            "task": p.task.name,
            "op": p.op.name,
            "mode": self.mode.name,
            "device": str(p.device),
            "units": p.units,
            "candidates": [self.names[n].name for n in self.pending],
            "references": list(p.op.references),
            "reference_dir": str(workdir / "references"),
            "skip": sorted((n, u) for n, u in self.outcome.done if n in self.names),
            **p.options,
        }

    def dispatch(self, ev: dict, proc: _Process) -> None:
        """One event of the worker (see ``audit.worker``) into the outcome and ``proc``."""
        kind, outcome, mode = ev["event"], self.outcome, self.mode.name
        if kind == "interpreter":
            outcome.interpreters[mode] = {"environment": self.env_name, **ev["info"]}
        elif kind == "mode":
            outcome.tf32 |= bool(ev.get("tf32"))
            outcome.modes[mode] = {"description": ev.get("description")}
        elif kind == "mode_unavailable":
            outcome.modes[mode] = {"unavailable": ev["reason"]}
            self.give_up_all(ev["reason"])
        elif kind == "unavailable":
            self.give_up(ev["candidate"], ev["reason"])
            self.pending.remove(ev["candidate"])
        elif kind == "source":
            outcome.entry(ev["candidate"])["source"] = ev["source"]
        elif kind == "inputs":
            outcome.fingerprints.setdefault(mode, {})[str(ev["case"])] = ev["sha256"]
        elif kind == "drawing":
            proc.current = (None, ev["unit"])
        elif kind == "start":
            proc.current = (ev["candidate"], ev["unit"])
        elif kind == "failed" and self.p.task.all_or_nothing:
            self.give_up(ev["candidate"], ev["reason"])
            proc.current = None
        elif kind in ("done", "failed"):
            self.record_done(ev)
            proc.current = None
        elif kind == "crashed":
            proc.raised = ev["reason"]
        elif kind == "timeout":
            proc.timed_out = True
        elif kind == "finished":
            proc.finished = True

    def blame(self, proc: _Process, what: str, log: str, progressed: bool) -> bool:
        """After a process died (``what``, ``log`` its last lines): give up what it was running, or
        the case it was drawing for every candidate. Returns whether to start another process."""
        self.stalls = 0 if progressed else self.stalls + 1
        mode, task = self.mode.name, self.p.task
        if proc.current is None:  # died outside any candidate and case: restart, unless it keeps failing
            if proc.timed_out or self.stalls >= 2:
                for name in self.pending:
                    if not self.outcome.finished(name, self.p.units):
                        self.give_up(name, f"mode {mode} process {what}:\n{log}")
                return False
        elif proc.current[0] is None:  # died drawing a case's inputs: that case is lost for every candidate
            unit = proc.current[1]
            reason = f"mode {mode} process {what} while drawing the inputs of case {unit}:\n{log}"
            for name in self.pending:
                if (name, unit) not in self.outcome.done:
                    self.record_done({"event": "failed", "candidate": name, "unit": unit, "reason": reason})
        else:
            blamed, unit = proc.current
            self.give_up(blamed, f"mode {mode} process {what} while running {task.unit} {unit}:\n{log}")
        self.pending = [n for n in self.pending if not self.outcome.finished(n, self.p.units)]
        if task.all_or_nothing:  # redo the candidates that finished only some units
            for n in self.pending:
                self.outcome.done -= {(n, u) for u in self.p.units}
                self.outcome.results.pop(n, None)
        return True


def run_mode(p: Plan, mode: Mode, outcome: Outcome, workdir: Path, timeout: float, advance: Advance) -> None:
    """Run ``mode``'s candidates in their own process(es). After a process dies, the candidate it
    was running is given up with the real exit status, signal or exception; a death while a case's
    inputs were drawn loses that case for every candidate; a death outside both restarts the
    process, unless two in a row finished nothing. Then the process restarts for what is left."""
    env, outcome.environments[mode.name] = mode_environment(os.environ, mode, p.inherit_env)
    env_name, python = p.environments.python_for(mode.name)
    run = _ModeRun(p, mode, outcome, advance, env_name)
    if env_name is not None:  # another environment: checked first, and none of this one's packages leak in
        found = probe(python, needs_cuda=p.device.type == "cuda")
        if "problem" in found:
            reason = f"environment {env_name} ({python}): {found['problem']}"
            outcome.modes[mode.name] = {"unavailable": reason}
            outcome.interpreters[mode.name] = {
                "environment": env_name,
                "python": python,
                "unavailable": found["problem"],
            }
            run.give_up_all(reason)
            return
        env["PYTHONPATH"] = worker_path()

    while run.pending:
        popen, read_fd, log_path = _spawn(run.job(workdir), workdir, env, python)
        proc, progress = _Process(), len(outcome.done)
        try:
            for ev in _events(popen, read_fd, time.monotonic() + timeout):
                run.dispatch(ev, proc)
        except BaseException:  # interrupted: stop the process now
            popen.kill()
            popen.wait()
            raise
        code, lingered = _wait_for_exit(popen)
        if proc.finished and code == 0:
            break
        what = f"timed out after {timeout:.0f} s" if proc.timed_out else _how_it_ended(code, proc.raised, lingered)
        if not run.blame(proc, what, log_tail(log_path), len(outcome.done) > progress):
            break


def run_plan(p: Plan, timeout: float, advance: Advance) -> Outcome:
    """Run every mode of the plan, in its own process, plain first."""
    outcome = Outcome()
    workdir = Path(tempfile.mkdtemp(prefix=f"audit-{p.op.name}-"))
    try:
        for mode_name in p.by_mode:
            run_mode(p, get_mode(mode_name), outcome, workdir, timeout, advance)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return outcome
