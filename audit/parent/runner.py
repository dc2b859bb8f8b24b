"""The runner: runs each mode of a plan in its own subprocess and collects what they report.

Plain mode runs first: in the bitwise task it computes the references and keeps their tensors on
disk in a temporary directory for the other modes' processes; the directory is removed when the op
is done. A mode process that crashes, runs out of memory or times out does not end the run: the
candidate it was running becomes ``{"unavailable": "<exit status and last output lines>"}`` and
the process is started again for the candidates it had not finished.

Modes take turns: a worker computes only once the runner gives it its turn, one mode at a time, in
plan order, so what one mode computes never overlaps another's computation. ``Runner`` may start
the next modes' workers (of this op or the next ones) before their turn, so that their imports,
mode switch, preparation and first inputs happen while an earlier mode computes; they then wait.
"""

from __future__ import annotations

import dataclasses
import os
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from audit.core.candidates import Candidate, candidates_for
from audit.core.events import (
    Crashed,
    Dispatch,
    Done,
    Drawing,
    Failed,
    Finished,
    Inputs,
    Interpreter,
    Job,
    Kernels,
    ModeOn,
    ModeUnavailable,
    Source,
    Start,
    Unavailable,
    Waiting,
    decode,
)
from audit.core.ops import OpSpec
from audit.core.timing import PHASES
from audit.parent import launch
from audit.parent.interpreters import Environments, WorkerSetup, worker_setup
from audit.parent.tasks import Task
from modes import Mode, get_mode

Advance = Callable[[str], None]


@dataclass
class Plan:
    """Which candidates run in which mode for one op, over which units of work: the cases of the
    bitwise task, or the checks of the prior-art task."""

    op: OpSpec
    task: Task
    units: list[int] | list[str]
    device: torch.device
    by_mode: dict[str, list[Candidate]]
    inherit_env: tuple[str, ...] = ()  # numerics variables the mode processes keep from this shell
    environments: Environments = field(default_factory=Environments)  # the interpreter of each mode
    repeats: int = 1  # bitwise: times each candidate computes each case
    kernels: bool = False  # bitwise: take kernel fingerprints (audit.core.kernels)
    sizes: dict | None = None  # prior art: the sizes of the checks (``sizes_json``)
    quick: bool = False  # prior art: the smoke-test sizes
    megatron_commit: str | None = None  # prior art: the Megatron-LM source tree used, if any
    contention: bool = False  # repeats (bitwise) or batch-invariance checks (prior art) under GPU load

    @property
    def total(self) -> int:
        return len(self.units) * sum(len(cs) for cs in self.by_mode.values())


def plan(
    op: OpSpec,
    task: Task,
    *,
    modes: list[str],
    names: list[str] | None,
    units: list[int] | list[str],
    device: torch.device,
    **fields,
) -> Plan:
    """Candidates per mode, references first, for ``task``; ``names`` filters by candidate or report
    name, but a task that needs the references always runs them, in plain mode, whether or not
    ``modes`` names it, as soon as any candidate runs. ``fields`` are the other fields of ``Plan``."""
    by_mode: dict[str, list[Candidate]] = {}
    ordered = sorted(candidates_for(op.name), key=lambda c: c.report_name("plain") not in op.references)

    def asked(c: Candidate, mode: str) -> bool:
        return c.runs_in(mode) and (names is None or c.name in names or c.report_name(mode) in names)

    if task.needs_references and "plain" not in modes and any(asked(c, m) for c in ordered for m in modes):
        modes = ["plain", *modes]
    for mode in sorted(modes, key=lambda m: m != "plain"):
        chosen = [
            c
            for c in ordered
            if asked(c, mode) or (task.needs_references and c.runs_in(mode) and c.report_name(mode) in op.references)
        ]
        if chosen:
            by_mode[mode] = chosen
    return Plan(op, task, units, device, by_mode, **fields)


@dataclass
class Outcome:
    """What the mode processes reported, accumulated across restarts."""

    results: dict[str, dict] = field(default_factory=dict)  # report name -> entry
    modes: dict[str, dict] = field(default_factory=dict)  # mode -> {"unavailable": ...} or {"description": ...}
    fingerprints: dict[str, dict[str, str]] = field(default_factory=dict)  # mode -> case -> sha256
    environments: dict[str, dict[str, str]] = field(default_factory=dict)  # mode -> its numerics variables
    interpreters: dict[str, dict] = field(default_factory=dict)  # mode -> the interpreter its worker reported
    kernels: dict[str, dict[str, dict]] = field(default_factory=dict)  # report name -> case -> fingerprint
    dispatch: dict[str, dict] = field(default_factory=dict)  # mode -> its process's dispatch switches
    timing: dict[str, dict] = field(default_factory=dict)  # mode -> its processes' times (``add_process``)
    tf32: bool = False
    done: set[tuple[str, object]] = field(default_factory=set)  # (report name, unit)
    failed: dict[tuple[str, str], str] = field(default_factory=dict)  # (report name, unit) -> why it failed there

    def entry(self, name: str) -> dict:
        return self.results.setdefault(name, {})

    def unavailable(self, name: str, reason: str) -> None:
        self.results[name] = {"unavailable": reason}

    def finished(self, name: str, units: list) -> bool:
        return all((name, u) in self.done for u in units)

    def add_process(self, mode: str, wall: float, phases: dict[str, float] | None) -> None:
        """One more worker process of ``mode``: its wall time from spawn to reaping and, when it
        finished, its phases (``audit.core.timing``); a process that died adds only wall time."""
        t = self.timing.setdefault(mode, {"processes": 0, "wall": 0.0, "phases": dict.fromkeys(PHASES, 0.0)})
        t["processes"] += 1
        t["wall"] += wall
        for name, seconds in (phases or {}).items():
            t["phases"][name] += seconds


@dataclass
class _Process:
    """What one worker process said before it ended."""

    current: tuple[str | None, object] | None = None  # (candidate, unit) running; candidate None: drawing inputs
    finished: bool = False  # it reported that every unit was done
    phases: dict[str, float] | None = None  # the phases it measured, sent with Finished or Crashed
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
        """``name`` is unavailable, for ``reason``, in every unit it has not finished: unit by unit
        (a ``Failed`` each) where its task keeps finished units and it finished some, so that those
        stand; otherwise as a whole (a reason it already has stays)."""
        left = [u for u in self.p.units if (name, u) not in self.outcome.done]
        whole = self.p.task.all_or_nothing or len(left) == len(self.p.units)
        if whole and "unavailable" not in self.outcome.results.get(name, {}):
            self.outcome.unavailable(name, reason)
        for u in left:
            if not whole:
                self.record_done(Failed(name, u, reason))
            if (name, u) not in self.outcome.done:
                self.outcome.done.add((name, u))
                self.advance(name)

    def give_up_all(self, reason: str) -> None:
        for name in self.pending:
            self.give_up(name, reason)
        self.pending = []

    def record_done(self, ev: Done | Failed) -> None:
        self.p.task.record(self.p, self.outcome, ev)
        if isinstance(ev, Failed):
            self.outcome.failed[(ev.candidate, str(ev.unit))] = ev.reason
        key = (ev.candidate, ev.unit)
        if key not in self.outcome.done and ev.candidate in self.pending:
            self.outcome.done.add(key)
            self.advance(ev.candidate)

    def job(self, workdir: Path) -> Job:
        p = self.p
        return Job(
            task=p.task.name,
            work=p.task.work,
            op=p.op.name,
            mode=self.mode.name,
            device=str(p.device),
            units=list(p.units),
            candidates=[self.names[n].name for n in self.pending],
            references=list(p.op.references),
            reference_dir=str(workdir / "references"),
            skip=sorted((n, u) for n, u in self.outcome.done if n in self.names),
            repeats=p.repeats,
            kernels=p.kernels,
            sizes=p.sizes,
            contention=p.contention,
        )

    def dispatch(self, ev, proc: _Process) -> None:
        """One event of the worker (``audit.core.events``) into the outcome and ``proc``."""
        outcome, mode = self.outcome, self.mode.name
        match ev:
            case Interpreter(info):
                outcome.interpreters[mode] = {"environment": self.env_name, **info}
            case ModeOn(description, tf32):
                outcome.tf32 |= tf32
                outcome.modes[mode] = {"description": description}
            case Dispatch(found):
                outcome.dispatch[mode] = found
            case ModeUnavailable(reason):
                outcome.modes[mode] = {"unavailable": reason}
                self.give_up_all(reason)
            case Unavailable(candidate, reason):
                self.give_up(candidate, reason)
                self.pending.remove(candidate)
            case Source(candidate, source):
                outcome.entry(candidate)["source"] = source
            case Inputs(case, sha256):
                outcome.fingerprints.setdefault(mode, {})[str(case)] = sha256
            case Drawing(unit):
                proc.current = (None, unit)
            case Waiting():
                proc.current = None
            case Start(candidate, unit):
                proc.current = (candidate, unit)
            case Kernels(candidate, unit, data):
                outcome.kernels.setdefault(candidate, {})[str(unit)] = data
            case Failed(candidate, _, reason) if self.p.task.all_or_nothing:
                self.give_up(candidate, reason)
                proc.current = None
            case Done() | Failed():
                self.record_done(ev)
                proc.current = None
            case Crashed(reason, phases):
                proc.raised, proc.phases = reason, phases
            case Finished(phases):
                proc.finished, proc.phases = True, phases

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
                    self.record_done(Failed(name, unit, reason))
        else:
            blamed, unit = proc.current
            self.give_up(blamed, f"mode {mode} process {what} while running {task.unit} {unit}:\n{log}")
        self.pending = [n for n in self.pending if not self.outcome.finished(n, self.p.units)]
        if task.all_or_nothing:  # redo the candidates that finished only some units
            for n in self.pending:
                self.outcome.done -= {(n, u) for u in self.p.units}
                self.outcome.results.pop(n, None)
        return True


@dataclass
class _Started:
    """A worker started for a mode before its turn: it runs until it needs the device, then waits
    for one byte on its turn pipe (``audit.worker.await_turn``)."""

    worker: launch.Launched
    events: int  # the read end of its events pipe
    turn: int  # the write end of its turn pipe
    spawned: float  # time.time() when it was started
    stem: Path  # its job file and log, without suffix

    def give_turn(self) -> None:
        """Let it compute: one byte on the turn pipe, which is then closed (a worker that has already
        ended needs no turn)."""
        try:
            os.write(self.turn, b"1")
        except BrokenPipeError:
            pass
        finally:
            os.close(self.turn)

    def discard(self) -> None:
        """Kill a worker whose turn never came (the command ended first) and close its pipes."""
        self.worker.kill()
        os.close(self.events)
        os.close(self.turn)


def _start_worker(run: _ModeRun, setup: WorkerSetup, workdir: Path) -> _Started:
    """Start a worker for what ``run`` has pending; it waits for its turn before it computes."""
    events_read, events_write = os.pipe()
    turn_read, turn_write = os.pipe()
    stem = workdir / f"job-{run.mode.name}-{time.monotonic_ns()}"
    spawned = time.time()
    job = dataclasses.replace(run.job(workdir), events_fd=events_write, turn_fd=turn_read, spawned=spawned)
    stem.with_suffix(".json").write_text(job.to_json())
    try:
        worker = launch.start(
            ["-m", "audit.worker.main", str(stem.with_suffix(".json"))],
            variables=setup.variables,
            log=stem.with_suffix(".log"),
            python=setup.python,
            pass_fds=(events_write, turn_read),
        )
    except BaseException:
        os.close(events_read)
        os.close(turn_write)
        raise
    finally:
        os.close(events_write)
        os.close(turn_read)
    return _Started(worker, events_read, turn_write, spawned, stem)


def _mode_run(p: Plan, mode: Mode, outcome: Outcome, *, timeout: float) -> tuple[_ModeRun, WorkerSetup]:
    """``mode``'s run and its worker's setup (``worker_setup``: variables, interpreter, and the
    problem of an unusable environment, probed within ``timeout``), recorded in ``outcome``. The
    run's ``advance`` is set when its turn comes."""
    setup = worker_setup(
        mode.name,
        environments=p.environments,
        inherit=p.inherit_env,
        needs_cuda=p.device.type == "cuda",
        timeout=timeout,
    )
    outcome.environments[mode.name] = setup.recorded
    return _ModeRun(p, mode, outcome, _not_yet, setup.environment), setup


def _not_yet(name: str) -> None:
    raise RuntimeError(f"{name} advanced before its mode's turn")


def run_mode(
    run: _ModeRun, setup: WorkerSetup, workdir: Path, *, timeout: float, started: _Started | None = None
) -> None:
    """Run ``run``'s candidates in their own process(es), starting with ``started`` when its worker
    was started ahead. After a process dies, the candidate it was running is given up from the unit
    it was running on (``_ModeRun.give_up``), with the real exit status, signal or exception; a
    death while a case's inputs were drawn loses that case for every candidate; a death outside
    both restarts the process, unless two in a row finished nothing. Then the process restarts for
    what is left."""
    outcome, mode = run.outcome, run.mode
    if setup.problem is not None:
        reason = f"environment {setup.environment} ({setup.python}): {setup.problem}"
        outcome.modes[mode.name] = {"unavailable": reason}
        outcome.interpreters[mode.name] = {
            "environment": setup.environment,
            "python": setup.python,
            "unavailable": setup.problem,
        }
        run.give_up_all(reason)
        return
    while run.pending:
        proc, progress = _Process(), len(outcome.done)
        code, lingered, log = _one_worker(run, proc, started or _start_worker(run, setup, workdir), timeout)
        started = None
        if proc.finished and code == 0:
            break
        what = launch.ended(None if proc.timed_out else code, timeout=timeout, raised=proc.raised, lingered=lingered)
        if not run.blame(proc, what, log, len(outcome.done) > progress):
            break


def _one_worker(run: _ModeRun, proc: _Process, started: _Started, timeout: float) -> tuple[int, bool, str]:
    """Give ``started`` its turn and feed its events to ``run.dispatch``: (exit status, whether it had
    to be killed after finishing, its log's tail). ``timeout`` counts from the turn."""
    worker = started.worker
    started.give_turn()
    turn = time.time()
    for line in launch.read_lines(worker, started.events, time.monotonic() + timeout):
        if line is None:
            proc.timed_out = True
            break
        try:
            run.dispatch(decode(line), proc)
        except ValueError as exc:  # not an event: the worker is broken, so it is stopped
            worker.kill()
            proc.raised = str(exc)
            break
    code, lingered = launch.settle(worker)
    ended = time.time()
    run.outcome.add_process(
        run.mode.name, ended - started.spawned, _with_exit(proc.phases, spawned=started.spawned, turn=turn, ended=ended)
    )
    return code, lingered, worker.tail()


def _with_exit(
    phases: dict[str, float] | None, *, spawned: float, turn: float, ended: float
) -> dict[str, float] | None:
    """A process's phases as it sent them (from ``start``, so they end when it sent them), completed
    by the runner to add up to its wall time, ``ended - spawned``: ``exit`` is the time from its last
    event, or from its turn when it ended before its turn came (having found nothing to compute),
    to its reaping; the time between such an end and the turn counts as ``waiting``."""
    if phases is None:
        return None
    sent = spawned + sum(phases.values())
    return {**phases, "waiting": phases["waiting"] + max(0.0, turn - sent), "exit": ended - max(sent, turn)}


class Runner:
    """Runs the plans of one command, one after another, each mode as ``run_mode`` does, and keeps
    the workers of up to ``ahead`` of the next modes (of this plan or the next ones) started ahead
    of their turn. A context manager: on the way out, however the command ends, workers still
    waiting are killed and the plans' temporary directories removed.

    Turns are given in plan order, one at a time, so one worker computes at a time, and plain mode's
    references are on disk before another mode's worker compares with them. The bits do not depend
    on ``ahead``; the time does: a waiting worker's imports and input drawing overlap the running
    one's computation."""

    def __init__(self, plans: list[Plan], *, timeout: float, ahead: int):
        self.plans, self.timeout, self.ahead = plans, timeout, ahead
        self.outcomes = [Outcome() for _ in plans]
        self.order = [(i, mode) for i, p in enumerate(plans) for mode in p.by_mode]
        self.prepared: dict[tuple[int, str], tuple[_ModeRun, WorkerSetup, _Started | None]] = {}
        self.workdirs: dict[int, tuple[Path, ExitStack]] = {}  # plan -> its temporary directory

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc) -> None:
        for _, _, started in self.prepared.values():
            if started is not None:
                started.discard()
        self.prepared.clear()
        for _, stack in self.workdirs.values():
            stack.close()
        self.workdirs.clear()

    def _workdir(self, i: int) -> Path:
        """Plan ``i``'s temporary directory (job files, logs, references), made on first use."""
        if i not in self.workdirs:
            stack = ExitStack()
            self.workdirs[i] = (stack.enter_context(launch.job_dir(self.plans[i].op.name)), stack)
        return self.workdirs[i][0]

    def _start(self, position: int) -> None:
        """Set up the mode at ``position`` in the run order and start its worker, once (a mode whose
        environment is unusable gets no worker: ``run_mode`` reports why)."""
        i, mode = self.order[position]
        if (i, mode) not in self.prepared:
            run, setup = _mode_run(self.plans[i], get_mode(mode), self.outcomes[i], timeout=self.timeout)
            started = None if setup.problem is not None else _start_worker(run, setup, self._workdir(i))
            self.prepared[(i, mode)] = (run, setup, started)

    def run(self, index: int, advance: Advance) -> Outcome:
        """Run plan ``index``'s modes (the plans before it have run) and return its outcome."""
        for mode in self.plans[index].by_mode:
            position = self.order.index((index, mode))
            for later in range(position, min(position + 1 + self.ahead, len(self.order))):
                self._start(later)
            run, setup, started = self.prepared.pop((index, mode))
            run.advance = advance
            run_mode(run, setup, self._workdir(index), timeout=self.timeout, started=started)
        if index in self.workdirs:
            self.workdirs.pop(index)[1].close()
        return self.outcomes[index]
