"""The closing lines of a command that wrote reports: one line per report with its verdict counts, a
recap across reports, and the first comparison that fails a gate. Pure functions of validated
reports and diffs."""

from __future__ import annotations

from collections import Counter

from .changes import Change
from .diff import Diff
from .kinds import Report, kind_of
from .verdict import Status, Verdict, is_difference

ORDER: tuple[Status, ...] = ("ok", "partial", "bad", "nd", "na")  # passing first, unavailable last


def _label(report: Report) -> str:
    key = kind_of(report).key(report.root)
    return key[1] + (" (quick)" if key[2] else "")


def _counted(reports: list[Report]) -> str:
    """``2 reusable, 1 forward only, 3 unavailable``: each verdict's count, passing first."""
    counts: Counter[tuple[int, str]] = Counter()
    for report in reports:
        kind = kind_of(report)
        for v in kind.verdicts(report.root):
            counts[(ORDER.index(kind.statuses[v.verdict]), v.verdict)] += 1
    return ", ".join(f"{n} {verdict}" for (_, verdict), n in sorted(counts.items())) or "no verdicts"


def report_line(report: Report) -> str:
    """``gate_residual: 1 forward only, 1 unavailable``."""
    return f"{_label(report)}: {_counted([report])}"


def recap(reports: list[Report]) -> str | None:
    """Across several reports: the verdict counts and which reports hold a difference (None for one)."""
    if len(reports) < 2:
        return None
    differing = [_label(r) for r in reports if kind_of(r).any_difference(r.root)]
    where = f"; differences in {', '.join(differing)}" if differing else "; no difference"
    return f"{len(reports)} reports: {_counted(reports)}{where}"


def _verdict_text(report: Report, v: Verdict) -> str:
    pair = f"{v.candidate} vs {v.reference}" if v.reference else v.candidate
    mode = f" [{v.mode}]" if v.mode else ""
    return f"{_label(report)}: {pair}{mode}: {v.verdict} ({v.detail})"


def first_difference(reports: list[Report]) -> str | None:
    """The first verdict that is a difference, as one line (None when there is none)."""
    for report in reports:
        kind = kind_of(report)
        for v in kind.verdicts(report.root):
            if is_difference(kind.statuses[v.verdict]):
                return _verdict_text(report, v)
    return None


def _change_text(op: str, c: Change) -> str:
    where = ", ".join(x for x in (c.reference and f"vs {c.reference}", c.case and f"case {c.case}", c.tensor) if x)
    return f"{op}: {c.candidate}{' ' + where if where else ''}: {c.old} -> {c.new}"


def first_regression(diff: Diff) -> str | None:
    """The first regression of a diff, as one line (None when there is none)."""
    for op in diff.ops:
        for c in op.changes:
            if c.kind == "regression":
                return _change_text(op.op, c)
    return None
