"""The two tasks a mode process can run, each one object that the planner, the runner and the
worker consult instead of comparing a task name.

- ``bitwise``: the units are cases. Every comparison needs the references, so they always run.
  A failed case loses that case's comparisons only (and, for a reference, the other references'
  comparisons with it); the candidate's other cases stand.
- ``prior_art``: the units are checks. A candidate's checks only make sense together, so one
  failed check gives the candidate up, and after a process restart a candidate that had finished
  only some checks runs them all again.

The worker side (``work``) computes the units and reports them as events; the runner side
(``record``) adds a ``done`` or ``failed`` event to the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    import torch

    from modes import Mode

    from .candidates import Candidate
    from .ops import OpSpec
    from .runner import Outcome, Plan

    Work = Callable[[dict, OpSpec, Mode, torch.device, list[tuple[str, Candidate]], Callable[..., None]], None]


@dataclass(frozen=True)
class Task:
    name: str  # the job's "task" field
    unit: str  # what a unit of work is called in messages: "case" or "check"
    needs_references: bool  # the op's references run whatever candidates were asked for
    all_or_nothing: bool  # a failed unit gives the candidate up; a restart redoes partial candidates
    record: Callable[[Plan, Outcome, dict], None]  # a done/failed event into the outcome
    work: Work  # in the worker: compute the units of the runnable candidates, emitting events


def _add_comparisons(outcome: Outcome, name: str, case: int, vs: dict) -> None:
    entry = outcome.entry(name)
    if "unavailable" not in entry:
        for ref, cmp in vs.items():
            entry.setdefault(f"vs {ref}", {})[str(case)] = cmp  # the key reports.schema.reference_of reads


def _record_bitwise(p: Plan, outcome: Outcome, ev: dict) -> None:
    name, case = ev["candidate"], ev["unit"]
    if ev["event"] == "done":
        vs = ev["data"]
    else:  # failed: every comparison of this case is lost, and so are the other references'
        refs = [r for r in p.op.references if r != name]
        vs = {r: {"unavailable": ev["reason"]} for r in refs}
        if name in p.op.references:
            lost = {"unavailable": f"reference {name} failed for this case: {ev['reason']}"}
            for r in refs:
                if (r, case) in outcome.done:
                    _add_comparisons(outcome, r, case, {name: lost})
    _add_comparisons(outcome, name, case, vs)


def _record_prior_art(p: Plan, outcome: Outcome, ev: dict) -> None:
    entry = outcome.entry(ev["candidate"])
    if "unavailable" not in entry:
        entry.update(ev["data"])


def _work_bitwise(job, op, mode, device, runnable, emit) -> None:
    from .bitwise import run_bitwise

    run_bitwise(job, op, device, runnable, emit)


def _work_prior_art(job, op, mode, device, runnable, emit) -> None:
    from .prior_art import run_prior_art

    run_prior_art(job, op, mode, device, runnable, emit)


BITWISE = Task(
    "bitwise", "case", needs_references=True, all_or_nothing=False, record=_record_bitwise, work=_work_bitwise
)
PRIOR_ART = Task(
    "prior_art", "check", needs_references=False, all_or_nothing=True, record=_record_prior_art, work=_work_prior_art
)
TASKS = {t.name: t for t in (BITWISE, PRIOR_ART)}
