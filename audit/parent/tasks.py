"""The two tasks a mode worker can run, each one object that the planner, the runner, the worker
and the command consult instead of comparing a task name.

- ``bitwise``: the units are cases. Every comparison needs the references, so they always run.
  A failed case loses that case's comparisons only (and, for a reference, the other references'
  comparisons with it); the candidate's other cases stand. Report kind ``h3_bitwise_reuse``.
- ``prior_art``: the units are checks. A candidate's checks only make sense together, so one
  failed check gives the candidate up, and after a process restart a candidate that had finished
  only some checks runs them all again. Report kind ``h3_prior_art``.

The worker side (``work``, a ``"module:function"`` path the worker imports) computes the units and
reports them as events; the runner side (``record``) adds a ``Done`` or ``Failed`` event to the
outcome, and ``assemble`` turns the outcome into the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from audit.core.events import Done, Failed
from audit.parent.assemble import bitwise_report, prior_art_report, reference_failed
from reports.bitwise import BitwiseReport
from reports.kinds import kind_name
from reports.prior_art import PriorArtReport

if TYPE_CHECKING:
    from audit.parent.runner import Outcome, Plan


@dataclass(frozen=True)
class Task:
    name: str
    unit: str  # what a unit of work is called in messages: "case" or "check"
    needs_references: bool  # the op's references run whatever candidates were asked for
    all_or_nothing: bool  # a failed unit gives the candidate up; a restart redoes partial candidates
    record: Callable[[Plan, Outcome, Done | Failed], None]  # a unit's end into the outcome
    work: str  # in the worker: computes the units of the runnable candidates, emitting events
    kind: str  # the report kind it writes
    assemble: Callable[[Plan, Outcome], dict]  # the report


def _add_comparisons(outcome: Outcome, name: str, case: int, vs: dict) -> None:
    entry = outcome.entry(name)
    if "unavailable" not in entry:
        for ref, cmp in vs.items():
            entry.setdefault(f"vs {ref}", {})[str(case)] = cmp  # the key reports.schema.reference_of reads


def _record_bitwise(p: Plan, outcome: Outcome, ev: Done | Failed) -> None:
    name, case = ev.candidate, ev.unit
    if isinstance(ev, Done):
        vs = ev.data
    else:  # every comparison of this case is lost, and so are the other references'
        refs = [r for r in p.op.references if r != name]
        vs = {r: {"unavailable": ev.reason} for r in refs}
        if name in p.op.references:
            lost = reference_failed(name, ev.reason)
            for r in refs:
                if (r, case) in outcome.done:
                    _add_comparisons(outcome, r, case, {name: lost})
    _add_comparisons(outcome, name, case, vs)


def _record_prior_art(p: Plan, outcome: Outcome, ev: Done | Failed) -> None:
    entry = outcome.entry(ev.candidate)
    if "unavailable" not in entry and isinstance(ev, Done):
        entry.update(ev.data)


BITWISE = Task(
    "bitwise",
    "case",
    needs_references=True,
    all_or_nothing=False,
    record=_record_bitwise,
    work="audit.worker.bitwise:run_bitwise",
    kind=kind_name(BitwiseReport),
    assemble=bitwise_report,
)
PRIOR_ART = Task(
    "prior_art",
    "check",
    needs_references=False,
    all_or_nothing=True,
    record=_record_prior_art,
    work="audit.worker.prior_art:run_prior_art",
    kind=kind_name(PriorArtReport),
    assemble=prior_art_report,
)
