"""The runner: plans one op's audit, runs each mode in its own subprocess, and assembles the
``h3_bitwise_reuse`` report.

Plain mode runs first: it computes the references and keeps their tensors on disk in a temporary
directory for the other modes' processes, and the directory is removed when the op is done. A mode
process that crashes, runs out of memory or times out does not end the run: the candidate it was
running becomes ``{"unavailable": "<exit status and last stderr lines>"}`` and the process is
started again for the candidates it had not finished.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from modes import MODES, Mode

from .candidates import Candidate, candidates_for
from .environment import collect, repository_state
from .ops import OpSpec

RFC = "RL-Align/RL-Kernel#420"
STDERR_TAIL = 12


@dataclass
class Plan:
    """Which candidates run in which mode, for one op."""

    op: OpSpec
    cases: list[int]
    device: torch.device
    by_mode: dict[str, list[Candidate]]

    @property
    def total(self) -> int:
        return len(self.cases) * sum(len(cs) for cs in self.by_mode.values())


def plan(op: OpSpec, modes: list[str], names: list[str] | None, cases: list[int], device: torch.device) -> Plan:
    """Candidates per mode, references first; ``names`` filters by candidate or report name
    (references always run: every comparison needs them)."""
    by_mode: dict[str, list[Candidate]] = {}
    ordered = sorted(candidates_for(op.name), key=lambda c: c.report_name("plain") not in op.references)
    for mode in sorted(modes, key=lambda m: m != "plain"):
        chosen = [
            c
            for c in ordered
            if c.runs_in(mode)
            and (names is None or c.name in names or c.report_name(mode) in names or c.report_name(mode) in op.references)
        ]
        if chosen:
            by_mode[mode] = chosen
    return Plan(op, cases, device, by_mode)


@dataclass
class Outcome:
    """What the mode processes reported, accumulated across restarts."""

    results: dict[str, dict] = field(default_factory=dict)
    fingerprints: dict[str, dict[str, str]] = field(default_factory=dict)  # mode -> case -> sha256
    tf32: bool = False
    done: set[tuple[str, int]] = field(default_factory=set)

    def entry(self, name: str) -> dict:
        return self.results.setdefault(name, {})

    def unavailable(self, name: str, reason: str) -> None:
        self.results[name] = {"unavailable": reason}


def _spawn(job: dict, workdir: Path, env: dict[str, str]) -> tuple[subprocess.Popen, int, Path]:
    read_fd, write_fd = os.pipe()
    job = dict(job, events_fd=write_fd)
    job_path = workdir / f"job-{job['mode']}-{time.monotonic_ns()}.json"
    job_path.write_text(json.dumps(job))
    log_path = job_path.with_suffix(".log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "audit.worker", str(job_path)],
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


def _tail(log_path: Path) -> str:
    lines = deque(log_path.read_text(errors="replace").splitlines(), maxlen=STDERR_TAIL)
    return "\n".join(lines)


def run_mode(
    p: Plan,
    mode: Mode,
    outcome: Outcome,
    workdir: Path,
    timeout: float,
    advance: Callable[[str], None],
) -> None:
    """Run ``mode``'s candidates in their own process(es); restart after a crash without the
    candidate that was running."""
    candidates = p.by_mode[mode.name]
    names = {c.report_name(mode.name): c for c in candidates}
    pending = list(names)
    env = {**os.environ, **mode.env}
    while pending:
        job = {
            "op": p.op.name,
            "mode": mode.name,
            "device": str(p.device),
            "cases": p.cases,
            "candidates": [names[n].name for n in pending],
            "references": list(p.op.references),
            "reference_dir": str(workdir / "references"),
            "skip": sorted(outcome.done),
        }
        proc, read_fd, log_path = _spawn(job, workdir, env)
        current: tuple[str, int] | None = None
        finished = timed_out = False
        try:
            for ev in _events(proc, read_fd, time.monotonic() + timeout):
                kind = ev["event"]
                if kind == "mode":
                    outcome.tf32 |= bool(ev.get("tf32"))
                elif kind == "mode_unavailable":
                    for name in pending:
                        outcome.unavailable(name, ev["reason"])
                    pending = []
                elif kind == "unavailable":
                    outcome.unavailable(ev["candidate"], ev["reason"])
                    pending.remove(ev["candidate"])
                    for _ in p.cases:
                        advance(ev["candidate"])
                elif kind == "source":
                    outcome.entry(ev["candidate"])["source"] = ev["source"]
                elif kind == "inputs":
                    outcome.fingerprints.setdefault(mode.name, {})[str(ev["case"])] = ev["sha256"]
                elif kind == "start":
                    current = (ev["candidate"], ev["case"])
                elif kind == "done":
                    _record(outcome, ev["candidate"], ev["case"], ev["vs"])
                    if (ev["candidate"], ev["case"]) not in outcome.done and ev["candidate"] in pending:
                        outcome.done.add((ev["candidate"], ev["case"]))
                        advance(ev["candidate"])
                    current = None
                elif kind == "case_failed":
                    failed, case = ev["candidate"], ev["case"]
                    refs = [r for r in p.op.references if r != failed]
                    _record(outcome, failed, case, {r: {"unavailable": ev["reason"]} for r in refs})
                    if failed in p.op.references:  # references that already ran lose this comparison
                        lost = {"unavailable": f"reference {failed} failed for this case: {ev['reason']}"}
                        for r in refs:
                            if (r, case) in outcome.done:
                                _record(outcome, r, case, {failed: lost})
                    outcome.done.add((ev["candidate"], ev["case"]))
                    advance(ev["candidate"])
                    current = None
                elif kind == "timeout":
                    timed_out = True
                elif kind == "finished":
                    finished = True
        finally:
            if proc.poll() is None and not finished:
                proc.kill()
            code = proc.wait()
        if finished and code == 0:
            break
        what = f"timed out after {timeout:.0f} s" if timed_out else f"exited with status {code}"
        if current is None:  # died outside any candidate: nothing can be blamed, nothing retried
            for name in pending:
                if not all((name, case) in outcome.done for case in p.cases):
                    outcome.unavailable(name, f"mode {mode.name} process {what}:\n{_tail(log_path)}")
            break
        blamed, case = current
        outcome.unavailable(blamed, f"mode {mode.name} process {what} while running case {case}:\n{_tail(log_path)}")
        for c in p.cases:
            if (blamed, c) not in outcome.done:
                advance(blamed)
        pending = [n for n in pending if n != blamed and not all((n, c) in outcome.done for c in p.cases)]


def _record(outcome: Outcome, name: str, case: int, vs: dict) -> None:
    entry = outcome.entry(name)
    if "unavailable" in entry:
        return
    for ref, cmp in vs.items():
        entry.setdefault(f"vs {ref}", {})[str(case)] = cmp


def _finish_results(p: Plan, outcome: Outcome) -> dict:
    """Order results like the example reports and drop comparisons with references that never ran."""
    missing_refs = {r for r in p.op.references if "unavailable" in outcome.results.get(r, {"unavailable": ""})}
    results = {}
    for name in sorted(outcome.results):
        entry = outcome.results[name]
        if "unavailable" in entry:
            results[name] = {"unavailable": entry["unavailable"]}
            continue
        clean = {"source": entry.get("source", "")}
        for key in sorted(k for k in entry if k.startswith("vs ")):
            if key.removeprefix("vs ") in missing_refs:
                continue
            clean[key] = {str(c): entry[key][str(c)] for c in p.cases if str(c) in entry[key]}
        results[name] = clean
    return results


def run_op(p: Plan, timeout: float, advance: Callable[[str], None]) -> dict:
    """Run every mode of the plan and return the report (a plain dict in the seeds' schema)."""
    outcome = Outcome()
    workdir = Path(tempfile.mkdtemp(prefix=f"audit-{p.op.name}-"))
    try:
        for mode_name in p.by_mode:
            run_mode(p, MODES[mode_name], outcome, workdir, timeout, advance)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    plain = outcome.fingerprints.get("plain", {})
    for mode_name, prints in outcome.fingerprints.items():
        if prints != {k: plain[k] for k in prints if k in plain}:
            for c in p.by_mode[mode_name]:
                outcome.unavailable(c.report_name(mode_name), f"inputs in mode {mode_name} differ from plain mode's")
    commit, dirty = repository_state()
    return {
        "kind": "h3_bitwise_reuse",
        "rfc": RFC,
        "op": p.op.name,
        "rl_kernel_commit": commit,
        "tracked_tree_dirty": dirty,
        "environment": collect(p.device, list(p.by_mode), outcome.tf32),
        "cases": p.cases,
        "inputs_sha256": plain,
        "results": _finish_results(p, outcome),
    }
