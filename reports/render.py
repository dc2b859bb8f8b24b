"""Drawing reports and diffs as rich tables (terminal) or Markdown (CI job summaries).

Both formats come from one neutral description, the ``Section``s of ``reports.tables``, each cell
with a status: ``ok`` (bitwise equal / invariant, green), ``bad`` (differs, red), ``partial``
(forward only, yellow), ``nd`` (not repeatable: nondeterministic, magenta; never plain red or
green) or ``na`` (unavailable, grey, with its reason).

A report is drawn as its kind's sections (``reports.kinds``): its verdict table first, then the
detail tables, each pair of candidates once. ``View`` narrows what is drawn.
"""

from __future__ import annotations

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .diff import Diff
from .kinds import Report, kind_of
from .tables import Cell, CellStatus, Section, View

STYLE = {"ok": "green", "bad": "red", "partial": "yellow", "nd": "magenta", "na": "grey50", "plain": ""}
MARK = {"ok": "✅ ", "bad": "❌ ", "partial": "🟡 ", "nd": "🔀 ", "na": "➖ ", "plain": ""}


def sections(report: Report, view: View = View()) -> list[Section]:
    """What ``audit show`` draws of a report: its kind's sections."""
    return kind_of(report).sections(report.root, view)


TERMINAL_ROWS = 1000  # rows per table in the terminal; Markdown and JSON always have every row


def _hidden_note(hidden: list[list[Cell]]) -> str:
    flagged = sum(any(c.status in ("bad", "partial", "nd", "na") for c in row) for row in hidden)
    return (
        f"{len(hidden):,} more rows not shown ({flagged:,} of them differ or are unavailable); "
        "--format markdown or json lists every row"
    )


def _table(s: Section) -> Table:
    """A section as a rich table of at most TERMINAL_ROWS rows. A column is never narrower than its
    longest word, so a number or a name is never broken across lines."""
    shown, hidden = s.rows[:TERMINAL_ROWS], s.rows[TERMINAL_ROWS:]
    note = "\n".join(n for n in (s.note, hidden and _hidden_note(hidden)) if n)
    table = Table(
        title=Text(s.title, style="bold"),
        caption=Text(note, style="dim") if note else None,
        title_justify="left",
        caption_justify="left",
    )
    rows = [row + [Cell("")] * (len(s.columns) - len(row)) for row in shown]
    for i, col in enumerate(s.columns):
        longest = max((len(w) for text in [col, *(r[i].text for r in rows)] for w in text.split()), default=1)
        table.add_column(col, overflow="fold", min_width=longest)
    for row in rows:
        table.add_row(*(Text(c.text, style=STYLE[c.status]) for c in row))
    return table


def to_rich(report: Report, view: View = View()) -> Group:
    return draw_rich(sections(report, view))


def draw_rich(drawn: list[Section]) -> Group:
    parts = []
    for s in drawn:
        if not s.columns:
            parts.append(Text(s.title, style="bold"))
            if s.note:
                parts.append(Text(s.note, style="dim"))
            continue
        parts.append(_table(s))
    return Group(*parts)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def to_markdown(report: Report, view: View = View()) -> str:
    return draw_markdown(sections(report, view))


def draw_markdown(drawn: list[Section]) -> str:
    lines: list[str] = []
    for s in drawn:
        lines.append(f"### {_md_escape(s.title)}")
        if s.note:
            lines.append(f"_{_md_escape(s.note)}_")
        if s.columns:
            lines.append("")
            lines.append("| " + " | ".join(s.columns) + " |")
            lines.append("|" + "---|" * len(s.columns))
            for row in s.rows:
                cells = row + [Cell("")] * (len(s.columns) - len(row))
                lines.append("| " + " | ".join(MARK[c.status] + _md_escape(c.text) for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)


def print_report(report: Report, console: Console | None = None, view: View = View()) -> None:
    (console or Console()).print(to_rich(report, view))


CHANGE_STATUS: dict[str, CellStatus] = {"regression": "bad", "improvement": "ok", "change": "partial", "noise": "nd"}


def diff_sections(diff: Diff) -> list[Section]:
    """The diff as sections: a summary, then per matched report the environment differences, what
    appeared or disappeared, every change of state, and (prior-art) latency ratios NEW / OLD."""
    unknown = [s for s in ("old", "new") if any(s in o.unknown_repeatability for o in diff.ops)]
    notes = [diff.summary()]
    if unknown:
        notes.append(
            f"repeatability unknown in {' and '.join(u.upper() for u in unknown)} (no 'repeatable' fields): "
            "count changes there cannot be told from nondeterminism"
        )
    notes += [f"only in OLD: {p}" for p in diff.only_old] + [f"only in NEW: {p}" for p in diff.only_new]
    out = [Section(f"audit diff {diff.old} → {diff.new}", " · ".join(notes))]
    for op in diff.ops:
        title = f"{op.op} ({op.kind})"
        if op.environment:
            env = Section(f"{title}: environment", columns=["field", "old", "new"])
            env.rows = [[Cell(e.field), Cell(e.old), Cell(e.new)] for e in op.environment]
            out.append(env)
        if op.appeared or op.disappeared:
            moved = Section(f"{title}: appeared or disappeared", columns=["", "what"])
            moved.rows = [[Cell("appeared", "ok"), Cell(a)] for a in op.appeared]
            moved.rows += [[Cell("disappeared", "na"), Cell(d)] for d in op.disappeared]
            out.append(moved)
        changes = Section(
            f"{title}: changes",
            f"{op.old_file} → {op.new_file}",
            ["kind", "candidate", "vs / mode", "case", "tensor", "old", "new"],
        )
        changes.rows = [
            [
                Cell(c.kind, CHANGE_STATUS[c.kind]),
                Cell(c.candidate),
                Cell(c.reference or ""),
                Cell(c.case or ""),
                Cell(c.tensor or ""),
                Cell(c.old),
                Cell(c.new),
            ]
            for c in sorted(op.changes, key=lambda c: list(CHANGE_STATUS).index(c.kind))
        ]
        if not changes.rows:
            changes.rows = [[Cell("none", "ok"), Cell("no comparison changed state")]]
        out.append(changes)
        if op.latency:
            lat = Section(f"{title}: latency NEW / OLD", columns=["mode", "candidate", "size", "fwd", "fwd+bwd"])
            lat.rows = [
                [
                    Cell(x.mode),
                    Cell(x.candidate),
                    Cell(x.size),
                    Cell(f"{x.fwd_ratio:.2f}×"),
                    Cell(f"{x.fwd_bwd_ratio:.2f}×"),
                ]
                for x in op.latency
            ]
            out.append(lat)
    return out
