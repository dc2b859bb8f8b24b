"""The ``h3_parallel`` report: sharded computations against the single-process ones, bitwise.

Per candidate and case, comparisons of the combined output and gradients with the same candidate
unsharded: ``native`` (reduced tensors summed by the backend's all-reduce), ``fixed_order`` (every
rank's partial summed in rank order) and, for a candidate that declares chunked partials,
``chunk_order`` (chunk partials all-gathered and folded in the single-process order; absent, with
``no_chunk_order`` saying why, otherwise). The first two are the naive sums: ``naive_mismatch``
counts the elements they change. ``reduced`` names the tensors that
went through a reduction under the layout; every other tensor was gathered, each element computed
by one rank. A run that stopped (a rank failed, or the run timed out) keeps its finished cases and
says why in ``failed``.

With ``repeats`` N > 1 (``--repeats``) the sharded step and the single process each ran N times:
every comparison carries ``repeatable`` as in the bitwise report, and
``single_process_repeat_differ`` gives the single process's own repeats per tensor, so that a
candidate's own nondeterminism is told apart from sharding's.

Verdicts, one per candidate, over every case (``decide``): ``nondeterministic``, ``bitwise``,
``bitwise with the fixed-order reduction``, ``bitwise with the chunk-order reduction``,
``gathered bitwise``, ``differs`` or ``unavailable``. Reports are matched
in a diff by op and layout.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .changes import EnvChange, OpDiff, State, availability, compare_tensors, reason, state, worst
from .schema import (
    CaseComparison,
    CaseKey,
    Count,
    Cmp,
    Environment,
    FieldError,
    ReportBase,
    Strict,
    Unavailable,
    listed,
)
from .tables import CPU_NOTE, Cell, Section, View, cmp_cell, verdict_section, visible
from .verdict import Status, Verdict

STATUSES: dict[str, Status] = {
    "nondeterministic": "nd",
    "bitwise": "ok",
    "bitwise with the fixed-order reduction": "partial",
    "bitwise with the chunk-order reduction": "ok",
    "gathered bitwise": "partial",
    "differs": "bad",
    "unavailable": "na",
}


REDUCTIONS = ("native", "fixed_order", "chunk_order")


class StepSeconds(Strict):
    """Rank 0's wall time of the fastest of the runs of each step, in seconds: the single process's
    evaluation, and the sharded step per reduction (the evaluation on the shard and the gathers,
    plus that reduction's sums; for ``chunk_order``, the candidate's chunk-order function, which
    computes the chunk partials itself, besides the evaluation's own reduced gradients). Ranks that
    share a GPU or take turns on CPU cores make the sharded steps slower than they would be alone."""

    single_process: float = Field(ge=0)
    native: float = Field(ge=0)
    fixed_order: float = Field(ge=0)
    chunk_order: float | None = Field(default=None, ge=0)


class ParallelCase(Strict):
    native: CaseComparison
    fixed_order: CaseComparison
    chunk_order: CaseComparison | None = None
    # per tensor label, the most elements that differed between two single-process runs; absent:
    # repeatability not checked (--repeats 1, or a report from before the check)
    single_process_repeat_differ: dict[str, Count] | None = None
    step_seconds: StepSeconds | None = None  # absent in reports from before it was measured

    def reductions(self) -> dict[str, CaseComparison]:
        """The comparisons this case has, by reduction, in ``REDUCTIONS`` order."""
        return {how: c for how in REDUCTIONS if (c := getattr(self, how)) is not None}


class ParallelCandidate(Strict):
    source: str
    reduced: list[str]
    seconds: float = Field(ge=0)
    cases: dict[CaseKey, ParallelCase]
    failed: str | None = None
    no_chunk_order: str | None = None  # why the chunk-order reduction does not apply


class ParallelReport(ReportBase):
    kind: Literal["h3_parallel"]
    environment: Environment
    layout: Literal["tp_column", "tp_row", "sp_rows"]
    ranks: int = Field(ge=1)
    backend: str
    nccl_environment: dict[str, str]
    cases: list[int]
    repeats: int | None = Field(default=None, ge=1)  # runs of each side per case; absent: before --repeats
    results: dict[str, ParallelCandidate | Unavailable]

    @model_validator(mode="after")
    def _cases_agree(self) -> "ParallelReport":
        cases = [str(c) for c in self.cases]
        known = set(cases)
        for name, c in self.results.items():
            if isinstance(c, Unavailable):
                continue
            extra = [k for k in c.cases if k not in known]
            if extra:
                raise FieldError(("results", name, "cases"), f"case {listed(extra)} is not among {listed(cases)}")
            missing = [k for k in cases if k not in c.cases]
            if missing and c.failed is None:
                raise FieldError(
                    ("results", name, "cases"),
                    f"lacks case {listed(missing)} without saying why: a run that stopped says so in failed",
                )
        return self


def kept(cmp: Cmp) -> bool:
    """Whether a comparison keeps the single-process bits: equal, and not known to be unrepeatable."""
    return cmp.equal and cmp.repeatable is not False


def decide(c: ParallelCandidate) -> tuple[str, str]:
    """One candidate's verdict over every case: ``differs`` (a gathered tensor differs), else
    ``nondeterministic`` (the single process itself does not repeat some tensor's bits: the
    candidate's own nondeterminism, not sharding's; such tensors are left out of every verdict),
    ``bitwise`` (everything equal with either naive reduction), ``bitwise with the fixed-order
    reduction`` (only then), ``bitwise with the chunk-order reduction`` (every case has it and it
    alone is equal), ``gathered bitwise`` (the gathered tensors equal, some reduced one differs every
    way) or ``unavailable`` (no case finished). A
    comparison counts as equal only when it is also repeatable (or not checked): a sharded step
    whose runs differ while the single process's do not is sharding's doing, and counts as a
    difference of that reduction."""
    if not c.cases:
        return "unavailable", c.failed or "no case finished"
    stopped = f"; stopped early: {c.failed}" if c.failed else ""
    own: dict[str, int] = {}  # tensors the single process does not repeat: no verdict on sharding there
    for case in c.cases.values():
        for t, n in (case.single_process_repeat_differ or {}).items():
            if n:
                own[t] = max(own.get(t, 0), n)
    per_tensor = [
        (how, t, cmp)
        for case in c.cases.values()
        for how, both in case.reductions().items()
        for t, cmp in both.by_tensor().items()
        if t not in own
    ]
    unrepeatable = list(dict.fromkeys(t for _, t, cmp in per_tensor if cmp.repeatable is False))
    stopped = (
        f"; the sharded runs differ from each other in {', '.join(unrepeatable)}" if unrepeatable else ""
    ) + stopped
    repeatable = ", repeatably" if per_tensor and all(cmp.repeatable for _, _, cmp in per_tensor) else ""
    differ = {how: [t for h, t, cmp in per_tensor if h == how and not kept(cmp)] for how in ("native", "fixed_order")}
    gathered = [t for t in dict.fromkeys(differ["native"] + differ["fixed_order"]) if t not in c.reduced]
    if own:
        noisy = (
            f"one process does not repeat its own bits for {', '.join(own)} (up to {max(own.values()):,} elements "
            "differ between its runs)"
        )
        if not gathered:
            return "nondeterministic", f"{noisy}: sharding cannot be judged on them{stopped}"
        stopped = f"; {noisy}{stopped}"
    if gathered:
        return "differs", f"gathered {', '.join(gathered)} differ from the single process{stopped}"
    if not differ["native"] and not differ["fixed_order"]:
        compared_names = {t for case in c.cases.values() for t in case.native.by_tensor()}
        summed = [t for t in c.reduced if t in compared_names]  # a forward-only candidate has no gradients to sum
        return (
            "bitwise",
            f"every tensor bitwise equal with either reduction{repeatable} ({', '.join(summed) or 'none'} reduced)"
            f"{stopped}",
        )
    if not differ["fixed_order"]:
        return (
            "bitwise with the fixed-order reduction",
            f"the backend's all-reduce changes {', '.join(dict.fromkeys(differ['native']))}{stopped}",
        )
    naive = ", ".join(dict.fromkeys(differ["fixed_order"]))
    chunked = [case.chunk_order for case in c.cases.values()]
    if all(ch is not None and all(kept(cmp) for cmp in ch.by_tensor().values()) for ch in chunked):
        return (
            "bitwise with the chunk-order reduction",
            f"chunk partials folded in the single-process order keep every tensor{repeatable}; the naive sums "
            f"change {naive}{stopped}",
        )
    no_chunks = f"; chunk order: {c.no_chunk_order}" if c.no_chunk_order else ""
    return (
        "gathered bitwise",
        f"gathered tensors equal; reduced {naive} differ with every reduction{no_chunks}{stopped}",
    )


def naive_mismatch(c: ParallelCandidate) -> dict[str, dict[str, dict[str, tuple[int, int]]]]:
    """{case: {reduced tensor: {reduction: (elements that differ from the single process, elements)}}}
    for every reduction the case has: how many elements each sum changes."""
    return {
        case: {
            t: {how: (cmp.by_tensor()[t].differ, cmp.by_tensor()[t].numel) for how, cmp in both.reductions().items()}
            for t in c.reduced
            if t in both.native.by_tensor()
        }
        for case, both in c.cases.items()
    }


def key(report: ParallelReport) -> tuple[str, str, bool]:
    """(kind, "op layout", False): what a report is matched by in a diff."""
    return report.kind, f"{report.op} {report.layout}", False


def candidates(report: ParallelReport) -> list[str]:
    """Every candidate in the report, available or not."""
    return list(report.results)


def ran(report: ParallelReport) -> set[str]:
    """The candidates with a finished case."""
    return {n for n, c in report.results.items() if isinstance(c, ParallelCandidate) and c.cases}


def incomplete(report: ParallelReport) -> dict[str, str]:
    """Each candidate with a finished case that stopped before its last (``failed``), with the first
    line of why."""
    return {
        n: f"stopped early: {c.failed.splitlines()[0]}"
        for n, c in report.results.items()
        if isinstance(c, ParallelCandidate) and c.cases and c.failed
    }


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
        f"{env.gpu or 'CPU'} · torch {env.torch} · CUDA {env.cuda} · cases {listed([str(c) for c in report.cases])}"
        + (f" · {report.repeats} runs of each side" if report.repeats else "")
        + "".join(f" · {k}={v}" for k, v in report.nccl_environment.items())
        + (CPU_NOTE if env.gpu is None else ""),
    )
    out = [head, verdict_section(verdicts(report), STATUSES, view)]
    for name, c in report.results.items():
        if isinstance(c, Unavailable) or not view.keeps(name):
            continue
        for how in REDUCTIONS:
            cases = {k: v.reductions()[how] for k, v in c.cases.items() if how in v.reductions()}
            if not cases:
                continue
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
        out += _mismatch_section(name, c, report.ranks)
        out += _time_section(name, c, report)
    return out


def _time_section(name: str, c: ParallelCandidate, report: ParallelReport) -> list[Section]:
    """Per case, the single process's step time and each reduction's sharded step time, with its
    ratio to the single process (``StepSeconds``)."""
    timed = {case: both.step_seconds for case, both in c.cases.items() if both.step_seconds is not None}
    if not timed:
        return []
    hows = [how for how in REDUCTIONS if any(getattr(t, how) is not None for t in timed.values())]
    note = f"rank 0's wall time, fastest of {report.repeats or 1} run(s); {report.ranks} ranks ({report.backend})" + (
        " on one GPU" if report.backend == "gloo" and report.environment.gpu else ""
    )
    section = Section(f"{name}, step time", note, ["case", "one process", *(h.replace("_", "-") for h in hows)])
    for case, t in sorted(timed.items(), key=lambda kv: int(kv[0])):
        cells = [Cell(case), Cell(f"{t.single_process * 1e3:,.1f} ms")]
        for how in hows:
            took = getattr(t, how)
            ratio = f" (× {took / t.single_process:.2f})" if t.single_process else ""
            cells.append(Cell("—", "na") if took is None else Cell(f"{took * 1e3:,.1f} ms{ratio}"))
        section.rows.append(cells)
    return [section]


def _mismatch_section(name: str, c: ParallelCandidate, ranks: int) -> list[Section]:
    """Elements of each reduced tensor that each reduction changes, count and percentage."""
    found = naive_mismatch(c)
    hows = [how for how in REDUCTIONS if any(how in per for case in found.values() for per in case.values())]
    if not any(found.values()):
        return []
    note = f"{ranks} ranks" + (f" · chunk order not applicable: {c.no_chunk_order}" if c.no_chunk_order else "")
    section = Section(f"{name}, elements the reductions change", note, ["case", "tensor", *hows])
    for case, per in sorted(found.items(), key=lambda kv: int(kv[0])):
        for t, counts in per.items():
            cells = []
            for how in hows:
                if how not in counts:
                    cells.append(Cell("—", "na"))
                    continue
                differ, numel = counts[how]
                share = f"{differ:,} / {numel:,} ({100 * differ / max(numel, 1):.1f} %)"
                cells.append(Cell(share, "bad" if differ else "ok"))
            section.rows.append([Cell(case), Cell(t), *cells])
    return [section]


def _state(c: ParallelCandidate | Unavailable, cases: list[str] | None = None) -> State | str:
    """A candidate's comparisons (in ``cases``, default all) together (``worst``), or why it did
    not run."""
    if isinstance(c, Unavailable):
        return f"unavailable: {c.unavailable}"
    chosen = c.cases.values() if cases is None else (c.cases[k] for k in cases if k in c.cases)
    return worst(state(t) for case in chosen for how in case.reductions().values() for t in how.by_tensor().values())


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
            old_how, new_how = o.cases[case].reductions(), n.cases[case].reductions()
            for how in (h for h in old_how if h in new_how):
                compare_tensors(
                    old_how[how].by_tensor(),
                    new_how[how].by_tensor(),
                    found,
                    candidate=name,
                    reference=how,
                    case=case,
                    where=f"{name}, case {case}, {how.replace('_', '-')} reduction",
                )
