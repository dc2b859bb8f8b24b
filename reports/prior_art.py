"""The ``h3_prior_art`` report: batch invariance, accuracy and latency per mode and candidate; its
verdicts, tables and diff.

Verdicts, one per mode and candidate: ``batch-invariant``, ``not invariant`` (which check and which
tensors) or ``unavailable``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_serializer, model_validator

from .changes import TABLE, Change, Latency, OpDiff, State, availability, reason, worst
from .schema import CaseKey, Count, Environment, FieldError, ReportBase, Strict, Timing, Unavailable, without_none
from .tables import CPU_NOTE, Cell, Section, View, timing_section, unavailable_cell, verdict_section
from .verdict import Status, Verdict

STATUSES: dict[str, Status] = {"batch-invariant": "ok", "not invariant": "bad", "unavailable": "na"}


class PriorArtEnvironment(Environment):
    megatron_source_commit: str | None


class RowsDiffer(Strict):
    rows: int = Field(ge=0)
    fwd_differ: int = Field(ge=0)
    rowgrad_differ: int = Field(ge=0)


class SubBatches(Strict):
    full_batch: Count
    sub_batch_sizes: list[int]
    sub_batches: Count
    fwd_differ: int = Field(ge=0)
    rowgrad_differ: int = Field(ge=0)


class SweepFailure(Strict):
    seed: int
    batch: int
    position: int
    row: int


class BatchSizeSweep(Strict):
    batch_sizes: list[int]
    probe_rows: list[int]
    comparisons: Count
    differ: int = Field(ge=0)
    first_failures: list[SweepFailure] = Field(max_length=8)


class BatchInvariance(Strict):
    """Every check, and ``batch_invariant``: true exactly when every check found nothing."""

    all_rows: dict[CaseKey, RowsDiffer]
    params_repeatable: bool
    full_vs_sub_batches: SubBatches
    batch_size_sweep: BatchSizeSweep
    batch_invariant: bool

    @model_validator(mode="after")
    def _verdict_follows_checks(self) -> "BatchInvariance":
        failures = invariance_failures(self)
        if self.batch_invariant and failures:
            raise FieldError(("batch_invariant",), f"is true, but {'; '.join(failures)}")
        if not self.batch_invariant and not failures:
            raise FieldError(("batch_invariant",), "is false, but every check found nothing")
        return self


class Accuracy(Strict):
    fwd_rel_err: float
    grad_rel_err: dict[str, float]
    fwd_us: float
    fwd_bwd_us: float


class PriorArtCandidate(Strict):
    source: str
    has_backward: bool
    batch_invariance: BatchInvariance
    accuracy_latency: dict[CaseKey, Accuracy]


class PriorArtReport(ReportBase):
    kind: Literal["h3_prior_art"]
    environment: PriorArtEnvironment
    contention: bool | None = None  # true: the batch-invariance checks ran under competing GPU load
    quick: bool
    timing: Timing | None = None
    results: dict[str, dict[str, PriorArtCandidate | Unavailable] | Unavailable]

    @model_serializer(mode="wrap")
    def _drop_absent_contention(self, handler):
        return without_none(handler(self), "contention", "timing")


def candidates(report: PriorArtReport) -> list[str]:
    """Every candidate of every mode that ran, each once."""
    return list(dict.fromkeys(n for found in report.results.values() if isinstance(found, dict) for n in found))


def ran(report: PriorArtReport) -> set[str]:
    """The candidates checked in some mode."""
    return {
        n
        for found in report.results.values()
        if isinstance(found, dict)
        for n, c in found.items()
        if isinstance(c, PriorArtCandidate)
    }


def incomplete(report: PriorArtReport) -> dict[str, str]:
    """Nothing: a candidate's checks are all or nothing (one that fails gives the candidate up), so
    none is checked in part."""
    return {}


def invariance_failures(bi: BatchInvariance) -> list[str]:
    """Which checks failed and for which tensors, as short phrases (empty when invariant)."""
    failures = []
    for n, rows in bi.all_rows.items():
        what = [w for w, k in (("output", rows.fwd_differ), ("row gradients", rows.rowgrad_differ)) if k]
        if what:
            differ = max(rows.fwd_differ, rows.rowgrad_differ)
            failures.append(f"rows alone vs in a batch of {n}: {' and '.join(what)} ({differ:,}/{rows.rows:,} rows)")
    if not bi.params_repeatable:
        failures.append("parameter gradients not repeatable")
    sub = bi.full_vs_sub_batches
    what = [w for w, k in (("output", sub.fwd_differ), ("row gradients", sub.rowgrad_differ)) if k]
    if what:
        failures.append(
            f"sub-batches: {' and '.join(what)} ({max(sub.fwd_differ, sub.rowgrad_differ):,}/{sub.sub_batches:,})"
        )
    sweep = bi.batch_size_sweep
    if sweep.differ:
        failures.append(f"batch-size sweep: {sweep.differ:,}/{sweep.comparisons:,} comparisons")
    return failures


def verdicts(report: PriorArtReport) -> list[Verdict]:
    """One verdict per mode and candidate; one per mode that did not run."""
    found = []
    for mode, in_mode in report.results.items():
        if isinstance(in_mode, Unavailable):
            found.append(Verdict(f"mode {mode}", None, "unavailable", in_mode.unavailable, mode))
            continue
        for name, c in in_mode.items():
            if isinstance(c, Unavailable):
                found.append(Verdict(name, None, "unavailable", c.unavailable, mode))
                continue
            failures = invariance_failures(c.batch_invariance)  # empty exactly when batch_invariant
            if failures:
                found.append(Verdict(name, None, "not invariant", "; ".join(failures), mode))
            else:
                found.append(Verdict(name, None, "batch-invariant", "every check bitwise equal", mode))
    return found


def _invariance_cell(c: PriorArtCandidate) -> Cell:
    bi = c.batch_invariance
    rows = sum(r.fwd_differ + r.rowgrad_differ for r in bi.all_rows.values())
    sub = bi.full_vs_sub_batches.fwd_differ + bi.full_vs_sub_batches.rowgrad_differ
    detail = f"rows {rows}, sub-batches {sub}, sweep {bi.batch_size_sweep.differ}/{bi.batch_size_sweep.comparisons}"
    if not bi.params_repeatable:
        detail += "; parameter gradients not repeatable"
    return Cell(f"{'yes' if bi.batch_invariant else 'no'} ({detail})", "ok" if bi.batch_invariant else "bad")


def sections(report: PriorArtReport, view: View = View()) -> list[Section]:
    """A head, the verdicts, then per mode a table of its candidates (at the largest size)."""
    env = report.environment
    sections = [
        Section(
            f"{report.op}: prior art{' (quick)' if report.quick else ''}",
            f"{env.gpu or 'CPU'} · torch {env.torch} · CUDA {env.cuda} · tf32 {env.tf32}"
            + (f" · Megatron source {env.megatron_source_commit}" if env.megatron_source_commit else "")
            + (" · batch-invariance checks under GPU contention" if report.contention else "")
            + (CPU_NOTE if env.gpu is None else ""),
        ),
        verdict_section(verdicts(report), STATUSES, view, by_mode=True),
    ]
    cols = [
        "candidate",
        "batch-invariant",
        "params repeatable",
        "size",
        "fwd err",
        "worst grad err",
        "fwd µs",
        "fwd+bwd µs",
    ]
    for mode, in_mode in report.results.items():
        section = Section(f"mode {mode}", columns=cols)
        if isinstance(in_mode, Unavailable):
            section.rows.append([Cell(mode), unavailable_cell(in_mode.unavailable)])
            sections.append(section)
            continue
        for name, c in in_mode.items():
            if not view.keeps(name):
                continue
            if isinstance(c, Unavailable):
                section.rows.append([Cell(name), unavailable_cell(c.unavailable)])
                continue
            if view.only_differ and c.batch_invariance.batch_invariant:
                continue
            size, acc = max(c.accuracy_latency.items(), key=lambda kv: int(kv[0]))
            worst = max(acc.grad_rel_err.values(), default=0.0)
            repeatable = c.batch_invariance.params_repeatable
            section.rows.append(
                [
                    Cell(name),
                    _invariance_cell(c),
                    Cell("yes" if repeatable else "no", "ok" if repeatable else "bad"),
                    Cell(size),
                    Cell(f"{acc.fwd_rel_err:.3g}"),
                    Cell(f"{worst:.3g}" if c.has_backward else "no backward"),
                    Cell(f"{acc.fwd_us:,.1f}"),
                    Cell(f"{acc.fwd_bwd_us:,.1f}" if c.has_backward else "—"),
                ]
            )
        if section.rows:
            sections.append(section)
    return sections + ([timing_section(report.timing)] if view.timing else [])


def _state(entry: PriorArtCandidate | Unavailable | dict) -> State | str:
    """A candidate's state (``equal``: batch-invariant; ``differs``: not), a mode's (its
    candidates' worst), or why it did not run."""
    if isinstance(entry, Unavailable):
        return f"unavailable: {entry.unavailable}"
    if isinstance(entry, dict):
        return worst(s for c in entry.values() if (s := _state(c)) in ("equal", "differs"))
    return "equal" if entry.batch_invariance.batch_invariant else "differs"


def _lose_checks(oc: PriorArtCandidate, nc: PriorArtCandidate, found: OpDiff, *, mode: str, name: str) -> None:
    """Gradients (``has_backward``) and batch sizes of the every-row check the new report lacks."""
    where = f"{name} in mode {mode}"
    if oc.has_backward and not nc.has_backward:
        found.lose(f"{where}: backward", names=[name, mode, "backward"], old="has backward")
    for n in (n for n in oc.batch_invariance.all_rows if n not in nc.batch_invariance.all_rows):
        found.lose(f"{where}: rows alone vs in a batch of {n}", names=[name, mode, n], old="checked")


def diff(old: PriorArtReport, new: PriorArtReport, found: OpDiff) -> None:
    """Modes and candidates that appeared; modes, candidates, backward and batch sizes lost;
    availability changes; a candidate that became not invariant is a regression (the reverse an
    improvement); latency NEW / OLD per size."""
    found.appeared += [f"mode {m}" for m in new.results if m not in old.results]
    for mode in (m for m in old.results if m not in new.results):
        found.lose(f"mode {mode}", names=[mode], old=_state(old.results[mode]))
    for mode in (m for m in new.results if m in old.results):
        om, nm = old.results[mode], new.results[mode]
        found.changes += availability(reason(om), reason(nm), now=_state(nm), candidate=f"mode {mode}", reference=mode)
        if isinstance(om, Unavailable) or isinstance(nm, Unavailable):
            continue
        found.appeared += [f"{n} in mode {mode}" for n in nm if n not in om]
        for name in (n for n in om if n not in nm):
            found.lose(f"{name} in mode {mode}", names=[name, mode], old=_state(om[name]))
        for name in (n for n in nm if n in om):
            oc, nc = om[name], nm[name]
            found.changes += availability(reason(oc), reason(nc), now=_state(nc), candidate=name, reference=mode)
            if isinstance(oc, Unavailable) or isinstance(nc, Unavailable):
                continue
            _lose_checks(oc, nc, found, mode=mode, name=name)
            was, now = oc.batch_invariance.batch_invariant, nc.batch_invariance.batch_invariant
            if was != now:
                label = {True: "batch-invariant", False: "not invariant"}
                found.changes.append(
                    Change(
                        kind=TABLE[(_state(oc), _state(nc))],
                        candidate=name,
                        reference=mode,
                        old=label[was],
                        new=label[now],
                    )
                )
            for size in (s for s in nc.accuracy_latency if s in oc.accuracy_latency):
                a, b = oc.accuracy_latency[size], nc.accuracy_latency[size]
                found.latency.append(
                    Latency(
                        mode=mode,
                        candidate=name,
                        size=size,
                        fwd_ratio=b.fwd_us / a.fwd_us if a.fwd_us else float("nan"),
                        fwd_bwd_ratio=b.fwd_bwd_us / a.fwd_bwd_us if a.fwd_bwd_us else float("nan"),
                    )
                )
