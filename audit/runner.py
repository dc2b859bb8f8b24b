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
    op: OpSpec, task_name: str, modes: list[str], names: list[str] | None, units: list, device: torch.device,
    inherit_env: tuple[str, ...] = (), environments: Environments | None = None, **options
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


def run_mode(p: Plan, mode: Mode, outcome: Outcome, workdir: Path, timeout: float, advance: Advance) -> None:
    """Run ``mode``'s candidates in their own process(es). After a process dies, the candidate it
    was running is given up with the real exit status, signal or exception; a death while a case's
    inputs were drawn loses that case for every candidate; a death outside both restarts the
    process, unless two in a row finished nothing. Then the process restarts for what is left."""
    names = {c.report_name(mode.name): c for c in p.by_mode[mode.name]}
    pending = list(names)
    env, outcome.environments[mode.name] = mode_environment(os.environ, mode, p.inherit_env)
    stalls = 0  # processes in a row that died without finishing anything

    def give_up(name: str, reason: str) -> None:
        """``name`` is unavailable for every unit it has not finished; a reason it already has stays."""
        if "unavailable" not in outcome.results.get(name, {}):
            outcome.unavailable(name, reason)
        for u in p.units:
            if (name, u) not in outcome.done:
                outcome.done.add((name, u))
                advance(name)

    def record_done(ev: dict) -> None:
        p.task.record(p, outcome, ev)
        key = (ev["candidate"], ev["unit"])
        if key not in outcome.done and ev["candidate"] in pending:
            outcome.done.add(key)
            advance(ev["candidate"])

    env_name, python = p.environments.python_for(mode.name)
    if env_name is not None:  # another environment: checked first, and none of this one's packages leak in
        found = probe(python, needs_cuda=p.device.type == "cuda")
        if "problem" in found:
            reason = f"environment {env_name} ({python}): {found['problem']}"
            outcome.modes[mode.name] = {"unavailable": reason}
            outcome.interpreters[mode.name] = {"environment": env_name, "python": python, "unavailable": found["problem"]}
            for name in pending:
                give_up(name, reason)
            return
        env["PYTHONPATH"] = worker_path()

    while pending:
        job = {
            "task": p.task.name,
            "op": p.op.name,
            "mode": mode.name,
            "device": str(p.device),
            "units": p.units,
            "candidates": [names[n].name for n in pending],
            "references": list(p.op.references),
            "reference_dir": str(workdir / "references"),
            "skip": sorted((n, u) for n, u in outcome.done if n in names),
            **p.options,
        }
        proc, read_fd, log_path = _spawn(job, workdir, env, python)
        current: tuple[str | None, object] | None = None  # (candidate, unit); candidate None: drawing inputs
        finished = timed_out = False
        raised: str | None = None
        progress = len(outcome.done)
        try:
            for ev in _events(proc, read_fd, time.monotonic() + timeout):
                kind = ev["event"]
                if kind == "interpreter":
                    outcome.interpreters[mode.name] = {"environment": env_name, **ev["info"]}
                elif kind == "mode":
                    outcome.tf32 |= bool(ev.get("tf32"))
                    outcome.modes[mode.name] = {"description": ev.get("description")}
                elif kind == "mode_unavailable":
                    outcome.modes[mode.name] = {"unavailable": ev["reason"]}
                    for name in pending:
                        give_up(name, ev["reason"])
                    pending = []
                elif kind == "unavailable":
                    give_up(ev["candidate"], ev["reason"])
                    pending.remove(ev["candidate"])
                elif kind == "source":
                    outcome.entry(ev["candidate"])["source"] = ev["source"]
                elif kind == "inputs":
                    outcome.fingerprints.setdefault(mode.name, {})[str(ev["case"])] = ev["sha256"]
                elif kind == "drawing":
                    current = (None, ev["unit"])
                elif kind == "start":
                    current = (ev["candidate"], ev["unit"])
                elif kind == "failed" and p.task.all_or_nothing:
                    give_up(ev["candidate"], ev["reason"])
                    current = None
                elif kind in ("done", "failed"):
                    record_done(ev)
                    current = None
                elif kind == "crashed":
                    raised = ev["reason"]
                elif kind == "timeout":
                    timed_out = True
                elif kind == "finished":
                    finished = True
        except BaseException:  # interrupted: stop the process now
            proc.kill()
            proc.wait()
            raise
        code, lingered = _wait_for_exit(proc)
        if finished and code == 0:
            break
        what = f"timed out after {timeout:.0f} s" if timed_out else _how_it_ended(code, raised, lingered)
        stalls = 0 if len(outcome.done) > progress else stalls + 1
        if current is None:  # died outside any candidate and case: restart, unless it keeps failing
            if timed_out or stalls >= 2:
                for name in pending:
                    if not outcome.finished(name, p.units):
                        give_up(name, f"mode {mode.name} process {what}:\n{log_tail(log_path)}")
                break
        elif current[0] is None:  # died drawing a case's inputs: that case is lost for every candidate
            unit = current[1]
            reason = f"mode {mode.name} process {what} while drawing the inputs of case {unit}:\n{log_tail(log_path)}"
            for name in pending:
                if (name, unit) not in outcome.done:
                    record_done({"event": "failed", "candidate": name, "unit": unit, "reason": reason})
        else:
            blamed, unit = current
            where = f"{p.task.unit} {unit}"
            give_up(blamed, f"mode {mode.name} process {what} while running {where}:\n{log_tail(log_path)}")
        pending = [n for n in pending if not outcome.finished(n, p.units)]
        if p.task.all_or_nothing:  # redo the candidates that finished only some units
            for n in pending:
                outcome.done -= {(n, u) for u in p.units}
                outcome.results.pop(n, None)


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
