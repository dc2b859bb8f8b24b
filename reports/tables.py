"""What every kind's tables are built from: sections of cells, each cell with a status.

A ``Section`` is a title, an optional note and a table whose cells carry a status: a verdict's
``Status`` (``ok`` bitwise equal / invariant, ``bad`` differs, ``partial`` forward only, ``nd`` not
repeatable, ``na`` unavailable, with its reason) or ``plain``. ``reports.render`` draws them for the
terminal or as Markdown. ``View`` narrows what a kind's sections hold: ``only_differ`` hides equal
cells (and rows and tables left empty), ``candidate`` keeps what involves one candidate, and
``kernels`` adds the kernel fingerprints of the kinds that record them, ``timing`` the mode
processes' time breakdown (``timing_section``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Mapping

from .hints import install_hint
from .schema import Cmp, Timing
from .verdict import Status, Verdict

CellStatus = Status | Literal["plain"]
CPU_NOTE = (
    " · CPU run: rl_kernel here is the PyTorch oracle of the kernels' algorithm, not the CUDA kernels, "
    "and CPU results are not GPU results"
)


@dataclass(frozen=True)
class View:
    """What to draw: ``only_differ`` hides equal cells; ``candidate`` keeps one candidate's rows;
    ``kernels`` adds the kernel fingerprints; ``timing`` the time breakdown."""

    only_differ: bool = False
    candidate: str | None = None
    kernels: bool = False
    timing: bool = False

    def keeps(self, *names: str | None) -> bool:
        return self.candidate is None or self.candidate in names


@dataclass
class Cell:
    """A table cell; ``comparison``: the comparison it shows, when it shows one (``cmp_cell``)."""

    text: str
    status: CellStatus = "plain"
    comparison: Cmp | None = None


def unavailable_cell(reason: str) -> Cell:
    return Cell(f"unavailable: {reason}", "na")


@dataclass
class Section:
    """A title, a note and a table (none without ``columns``); ``verdicts``: it is the verdict
    table (``verdict_section``), not a detail table."""

    title: str
    note: str = ""
    columns: list[str] = field(default_factory=list)
    rows: list[list[Cell]] = field(default_factory=list)
    verdicts: bool = False


def timing_section(timing: Timing | None) -> Section:
    """Per mode: its processes, their wall time, each phase's seconds and share of it, and the time
    no phase accounts for (a process that died); a note instead for a report without timing."""
    if timing is None:
        return Section("timing", "this report has no timing (written before it was measured)")
    phases = list(dict.fromkeys(p for t in timing.modes.values() for p in t.phases))
    section = Section(
        "timing",
        "seconds per mode's worker process(es) from spawn to end, and where they went (audit.core.timing)",
        ["mode", "processes", "wall", *phases, "unaccounted"],
    )
    for mode, t in timing.modes.items():
        share = [t.phases.get(p, 0.0) for p in phases]
        section.rows.append(
            [Cell(mode), Cell(str(t.processes)), Cell(f"{t.wall:.2f}")]
            + [Cell(f"{v:.2f} ({100 * v / t.wall:.0f} %)" if t.wall else f"{v:.2f}") for v in share]
            # phases that add up to a hair over the wall time (float sums) show as 0.00, not -0.00
            + [Cell(f"{round(t.unaccounted, 2) + 0.0:.2f}", "bad" if t.unaccounted > 0.05 * t.wall else "plain")]
        )
    return section


def cmp_cell(c: Cmp) -> Cell:
    """One comparison: equal (with its element count), what differs, or the error."""
    if c.error:
        return Cell(f"error: {c.error}", "bad", c)
    if c.equal:
        return Cell(f"equal ({c.numel:,})", "nd" if c.repeatable is False else "ok", c)
    text = f"{c.differ:,}/{c.numel:,} differ, max {c.max_abs:.3g}"
    if c.ulp_max is not None:
        text += f", {c.ulp_max:,} ulp"
    if c.repeatable is False:
        return Cell(f"nondeterministic: {text}; runs differ in {c.repeat_differ:,}", "nd", c)
    return Cell(text, "bad", c)


def shown_verdicts(found: list[Verdict], statuses: Mapping[str, Status], view: View) -> list[Verdict]:
    """The verdicts ``view`` keeps, in their order, the unavailable ones (status ``na``) last."""
    kept = [v for v in found if view.keeps(v.candidate, v.reference)]
    return sorted(kept, key=lambda v: statuses[v.verdict] == "na")


def verdict_hint(v: Verdict, status: Status) -> str | None:
    """How to install what an unavailable verdict (status ``na``) misses, where an extra brings it."""
    return install_hint(v.detail) if status == "na" else None


def verdict_section(
    found: list[Verdict], statuses: Mapping[str, Status], view: View, *, by_mode: bool = False
) -> Section:
    """The decision table that comes first, each verdict coloured by its kind's ``statuses``,
    unavailable ones last with their install hints; ``by_mode``: the first column is the mode
    (prior art), not the candidate and its reference."""
    columns = ["mode", "candidate", "verdict", "detail"] if by_mode else ["candidate", "vs", "verdict", "detail"]
    section = Section("verdicts", columns=columns, verdicts=True)
    for v in shown_verdicts(found, statuses, view):
        lead = v.mode if by_mode else v.candidate
        second = v.candidate if by_mode else (v.reference or "every reference")
        status = statuses[v.verdict]
        hint = verdict_hint(v, status)
        detail = f"{v.detail} · install: {hint}" if hint else v.detail
        section.rows.append([Cell(lead or ""), Cell(second), Cell(v.verdict, status), Cell(detail)])
    return section


def visible(row: list[Cell], view: View) -> list[Cell] | None:
    """The row with equal cells blanked under ``only_differ``; None when nothing is left."""
    if not view.only_differ:
        return row
    shown = [row[0]] + [Cell("") if c.status == "ok" else c for c in row[1:]]
    return shown if any(c.text for c in shown[1:]) else None
