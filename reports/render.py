"""Drawing reports and diffs as rich tables (terminal) or Markdown (CI job summaries).

Both formats come from one neutral description, the ``Section``s of ``reports.tables``, each cell
with a status: ``ok`` (bitwise equal / invariant, green), ``bad`` (differs, red), ``partial``
(forward only, yellow), ``nd`` (not repeatable: nondeterministic, magenta; never plain red or
green) or ``na`` (unavailable, grey, with its reason).

A report is drawn as its kind's sections (``reports.kinds``): its verdict table first, then the
detail tables, each pair of candidates once. ``View`` narrows what is drawn. In the terminal no
table is cropped at any width: one that does not fit side by side is drawn as one block per row.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderResult
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


BORDER = 3  # columns each table column adds to its text: a border and one space either side


def _fit(widest: list[int], narrowest: list[int], room: int) -> list[int] | None:
    """Column widths that fill at most ``room``: each column its ``widest`` when all fit, else at
    least its ``narrowest``, the rest shared in proportion to what each column lacks; None when
    even the narrowest do not fit."""
    if sum(widest) <= room:
        return widest
    spare = room - sum(narrowest)
    if spare < 0:
        return None
    lacking = [w - n for w, n in zip(widest, narrowest)]
    total = sum(lacking)
    return [n + spare * lack // total for n, lack in zip(narrowest, lacking)]


class _Fitted:
    """A section at the console's width, nothing cropped: a table when its columns fit side by
    side with no word broken, otherwise one block per row (each column's name beside its value,
    the row's first cell heading the block). Cells wrap at spaces; only a word wider than the
    blocks' value column (the console less the names) breaks, across lines."""

    def __init__(self, section: Section) -> None:
        self.section = section
        self.shown = [row + [Cell("")] * (len(section.columns) - len(row)) for row in section.rows[:TERMINAL_ROWS]]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        s = self.section
        yield Text(s.title, style="bold")
        texts = [[col, *(row[i].text for row in self.shown)] for i, col in enumerate(s.columns)]
        widest = [max(cell_len(line) for t in col for line in t.split("\n")) for col in texts]
        words = [max((cell_len(w) for t in col for w in t.split()), default=0) for col in texts]
        widths = _fit(widest, words, options.max_width - BORDER * len(s.columns) - 1)
        yield self._table(widths) if widths else self._blocks(options.max_width)
        hidden = s.rows[TERMINAL_ROWS:]
        note = "\n".join(n for n in (s.note, hidden and _hidden_note(hidden)) if n)
        if note:
            yield Text(note, style="dim")

    def _table(self, widths: list[int]) -> Table:
        table = Table()
        for col, width in zip(self.section.columns, widths):
            table.add_column(col, overflow="fold", width=width)
        for row in self.shown:
            table.add_row(*(Text(c.text, style=STYLE[c.status]) for c in row))
        return table

    def _blocks(self, room: int) -> Table:
        columns = self.section.columns
        label = min(max(cell_len(c) for c in columns), room // 3)
        table = Table(show_header=False)
        table.add_column(overflow="fold", width=label)
        values = [line for row in self.shown for c in row for line in c.text.split("\n")]
        value = min(room - label - 2 * BORDER - 1, max(map(cell_len, values), default=1))
        table.add_column(overflow="fold", width=max(1, value))
        for row in self.shown:
            lines = [(Text(columns[0], style="bold"), Text(row[0].text, style=f"bold {STYLE[row[0].status]}"))]
            lines += [
                (Text(col), Text(c.text, style=STYLE[c.status])) for col, c in zip(columns[1:], row[1:]) if c.text
            ]
            for i, line in enumerate(lines):
                table.add_row(*line, end_section=i == len(lines) - 1)
        return table


def to_rich(report: Report, view: View = View()) -> Group:
    return draw_rich(sections(report, view))


def draw_rich(drawn: list[Section]) -> Group:
    """The sections for a console: a section without columns is its title and note; a table is
    fitted to the console's width when printed (``_Fitted``)."""
    parts = []
    for s in drawn:
        if not s.columns:
            parts.append(Text(s.title, style="bold"))
            if s.note:
                parts.append(Text(s.note, style="dim"))
            continue
        parts.append(_Fitted(s))
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


CHANGE_STATUS: dict[str, CellStatus] = {
    "regression": "bad",
    "improvement": "ok",
    "change": "partial",
    "noise": "nd",
    "kernel change": "partial",
}


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
