"""The ``h3_parallel`` report: sharded computations against the single-process ones, bitwise.

Per candidate and case, two comparisons of the combined output and gradients with the same
candidate unsharded: ``native`` (reduced tensors summed by the backend's all-reduce) and
``fixed_order`` (every rank's partial summed in rank order). ``reduced`` names the tensors that
went through a reduction under the layout; every other tensor was gathered, each element computed
by one rank. A run that stopped (a rank failed, or the run timed out) keeps its finished cases and
says why in ``failed``.

Verdicts, one per candidate, over every case (``decide``): ``bitwise``, ``bitwise with the
fixed-order reduction``, ``gathered bitwise``, ``differs`` or ``unavailable``. Reports are matched
in a diff by op and layout.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .changes import EnvChange, OpDiff, State, availability, compare_tensors, reason, state, worst
from .schema import CaseComparison, CaseKey, Environment, ReportBase, Strict, Unavailable
from .tables import CPU_NOTE, Cell, Section, View, cmp_cell, verdict_section, visible
from .verdict import Status, Verdict

STATUSES: dict[str, Status] = {
    "bitwise": "ok",
    "bitwise with the fixed-order reduction": "partial",
    "gathered bitwise": "partial",
    "differs": "bad",
    "unavailable": "na",
}


class ParallelCase(Strict):
    native: CaseComparison
    fixed_order: CaseComparison


class ParallelCandidate(Strict):
    source: str
    reduced: list[str]
    seconds: float = Field(ge=0)
    cases: dict[CaseKey, ParallelCase]
    failed: str | None = None


class ParallelReport(ReportBase):
    kind: Literal["h3_parallel"]
    environment: Environment
    layout: Literal["tp_column", "tp_row", "sp_rows"]
    ranks: int = Field(ge=1)
    backend: str
    nccl_environment: dict[str, str]
    cases: list[int]
    results: dict[str, ParallelCandidate | Unavailable]


def decide(c: ParallelCandidate) -> tuple[str, str]:
    """One candidate's verdict over every case: ``bitwise`` (everything equal with either
    reduction), ``bitwise with the fixed-order reduction`` (only then), ``gathered bitwise`` (the
    gathered tensors equal, some reduced one differs either way), ``differs`` (a gathered tensor
    differs) or ``unavailable`` (no case finished)."""
    if not c.cases:
        return "unavailable", c.failed or "no case finished"
    stopped = f"; stopped early: {c.failed}" if c.failed else ""
    differ = {
        how: [t for case in c.cases.values() for t, cmp in getattr(case, how).by_tensor().items() if not cmp.equal]
        for how in ("native", "fixed_order")
    }
    gathered = [t for t in dict.fromkeys(differ["native"] + differ["fixed_order"]) if t not in c.reduced]
    if gathered:
        return "differs", f"gathered {', '.join(gathered)} differ from the single process{stopped}"
    if not differ["native"] and not differ["fixed_order"]:
        compared = {t for case in c.cases.values() for t in case.native.by_tensor()}
        summed = [t for t in c.reduced if t in compared]  # a forward-only candidate has no gradients to sum
        return (
            "bitwise",
            f"every tensor bitwise equal with either reduction ({', '.join(summed) or 'none'} reduced){stopped}",
        )
    if not differ["fixed_order"]:
        return (
            "bitwise with the fixed-order reduction",
            f"the backend's all-reduce changes {', '.join(dict.fromkeys(differ['native']))}{stopped}",
        )
    return (
        "gathered bitwise",
        f"gathered tensors equal; reduced {', '.join(dict.fromkeys(differ['fixed_order']))} differ "
        f"with either reduction{stopped}",
    )


def key(report: ParallelReport) -> tuple[str, str, bool]:
    """(kind, "op layout", False): what a report is matched by in a diff."""
    return report.kind, f"{report.op} {report.layout}", False


def candidates(report: ParallelReport) -> list[str]:
    """Every candidate in the report, available or not."""
    return list(report.results)


def ran(report: ParallelReport) -> set[str]:
    """The candidates with a finished case."""
    return {n for n, c in report.results.items() if isinstance(c, ParallelCandidate) and c.cases}


def verdicts(report: ParallelReport) -> list[Verdict]:
    """One verdict per candidate under the report's layout (``decide``)."""
    out = []
    for name, c in report.results.items():
        if isinstance(c, Unavailable):
            out.append(Verdict(name, None, "unavailable", c.unavailable))
        else:
            verdict, detail = decide(c)
            out.append(
                Verdict(name, None, verdict, f"{report.layout}, {report.ranks} ranks, {report.backend}: {detail}")
            )
    return out


def sections(report: ParallelReport, view: View = View()) -> list[Section]:
    """Verdicts, then per candidate a case x tensor table for each reduction; reduced tensors are
    marked with a ``Σ``."""
    env = report.environment
    head = Section(
        f"{report.op}: {report.layout} over {report.ranks} ranks ({report.backend}) vs one process",
        f"{env.gpu or 'CPU'} · torch {env.torch} · CUDA {env.cuda} · cases {', '.join(map(str, report.cases))}"
        + "".join(f" · {k}={v}" for k, v in report.nccl_environment.items())
        + (CPU_NOTE if env.gpu is None else ""),
    )
    out = [head, verdict_section(verdicts(report), STATUSES, view)]
    for name, c in report.results.items():
        if isinstance(c, Unavailable) or not view.keeps(name):
            continue
        for how in ("native", "fixed_order"):
            cases = {k: getattr(v, how) for k, v in c.cases.items()}
            labels = list(dict.fromkeys(t for case in cases.values() for t in case.by_tensor()))
            columns = ["case", *(f"{t} Σ" if t in c.reduced else t for t in labels)]
            section = Section(
                f"{name}, {how.replace('_', '-')} reduction",
                c.source + (f" · stopped: {c.failed}" if c.failed else ""),
                columns,
            )
            for case, comparison in sorted(cases.items(), key=lambda kv: int(kv[0])):
                found = comparison.by_tensor()
                row = [Cell(case), *(cmp_cell(found[t]) if t in found else Cell("—", "na") for t in labels)]
                if (shown := visible(row, view)) is not None:
                    section.rows.append(shown)
            if section.rows or not view.only_differ:
                out.append(section)
    return out


def _state(c: ParallelCandidate | Unavailable, cases: list[str] | None = None) -> State | str:
    """A candidate's comparisons (in ``cases``, default all) together (``worst``), or why it did
    not run."""
    if isinstance(c, Unavailable):
        return f"unavailable: {c.unavailable}"
    return worst(
        state(t)
        for key, case in c.cases.items()
        if cases is None or key in cases
        for how in (case.native, case.fixed_order)
        for t in how.by_tensor().values()
    )


def diff(old: ParallelReport, new: ParallelReport, found: OpDiff) -> None:
    """Per candidate, case, reduction (as ``reference``) and tensor; a changed layout, rank count
    or backend is an environment difference; a candidate, case or tensor the new report lacks is
    lost."""
    found.environment += [
        EnvChange(field=f, old=str(getattr(old, f)), new=str(getattr(new, f)))
        for f in ("layout", "ranks", "backend")
        if getattr(old, f) != getattr(new, f)
    ]
    found.appeared += [f"candidate {n}" for n in new.results if n not in old.results]
    for name in (n for n in old.results if n not in new.results):
        found.lose(f"candidate {name}", names=[name], old=_state(old.results[name]))
    for name in (n for n in new.results if n in old.results):
        o, n = old.results[name], new.results[name]
        found.changes += availability(reason(o), reason(n), now=_state(n), candidate=name)
        if isinstance(o, Unavailable) or isinstance(n, Unavailable):
            continue
        for case in o.cases:
            if case not in n.cases:
                found.lose(f"{name}, case {case}", names=[name, case], old=_state(o, [case]))
                continue
            for how in ("native", "fixed_order"):
                compare_tensors(
                    getattr(o.cases[case], how).by_tensor(),
                    getattr(n.cases[case], how).by_tensor(),
                    found,
                    candidate=name,
                    reference=how,
                    case=case,
                    where=f"{name}, case {case}, {how.replace('_', '-')} reduction",
                )
