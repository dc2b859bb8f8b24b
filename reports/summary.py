"""The closing lines of a command that wrote reports: one line per report with its verdict counts
and a recap across reports. Pure functions of validated reports."""

from __future__ import annotations

from collections import Counter

from .kinds import Report, kind_of
from .verdict import Status

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
