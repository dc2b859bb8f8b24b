"""``audit report --html``: reports of any kinds as one self-contained HTML page.

The page is a pure function of validated reports (and optionally their diff against a baseline).
It holds its CSS and JavaScript inline and loads nothing, so it opens from a CI artifact or an
e-mail without a server. From top to bottom:

- the verdicts of every report, in one table (each kind's ``verdicts``, coloured by its
  ``statuses``), and the files that could not be read, each named with why;
- with a baseline, the diff (``reports.render.diff_sections``);
- per report: its head note, a grid, its detail tables (each kind's ``sections``) and its
  environment. The grid has one row per detail table and compared column (for a bitwise report:
  each candidate pair's output and each gradient apart; for a chain replay, the chained and the
  isolated stage) and one column per row key of that table (case, stage, step), each cell
  coloured by the same status as the table's cell, which is the status the verdicts are decided
  from (``reports.tables.cmp_cell``).

Every cell that shows a comparison opens, when clicked, its counts, ULP histogram, first differing
index and repeatability; the comparisons are one JSON array in the page. Every table sorts by a
click on a column's head. One filter (text, and statuses) hides the rows of every table that do not
match; its state is the page's URL fragment (``#q=liger&status=bad,nd``), so a link, or a browser
started on such a URL, opens the page filtered.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from pathlib import Path

from .diff import Diff
from .kinds import Report, kind_of
from .render import diff_sections
from .schema import Cmp
from .summary import ORDER, recap, report_line
from .tables import Cell, Section, View, shown_verdicts, verdict_hint

ASSETS = Path(__file__).with_name("assets")  # the page's CSS and JavaScript, inlined into it
STATUS_NAMES = {
    "ok": "equal / passes",
    "partial": "forward only",
    "bad": "differs",
    "nd": "not repeatable",
    "na": "unavailable",
}


class _Comparisons:
    """The comparisons the page shows, each once, by the index their cells name (``data-c``)."""

    def __init__(self) -> None:
        self.items: list[dict] = []
        self._index: dict[int, int] = {}

    def index(self, c: Cmp, where: str) -> int:
        if id(c) not in self._index:
            self._index[id(c)] = len(self.items)
            data = c.model_dump(mode="json")
            self.items.append({"where": where, **data})
        return self._index[id(c)]


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _cell(cell: Cell, comparisons: _Comparisons, where: str, *, tag: str = "td", compact: bool = False) -> str:
    """A cell coloured by its status; one that shows a comparison names it (``data-c``); ``compact``:
    no text, the text and ``where`` as its title (a grid's square)."""
    attrs = f' class="s-{cell.status}"'
    if cell.comparison is not None:
        attrs += f' data-c="{comparisons.index(cell.comparison, where)}"'
    if compact:
        return f'<{tag}{attrs} title="{_e(where + ": " + cell.text)}"></{tag}>'
    return f"<{tag}{attrs}>{_e(cell.text)}</{tag}>"


def _table(section: Section, comparisons: _Comparisons, *, grid: bool = False) -> str:
    """A section's table, sortable and filterable; ``grid``: cells are coloured squares."""
    head = "".join(f"<th>{_e(c)}</th>" for c in section.columns)
    body = []
    for row in section.rows:
        cells = row + [Cell("")] * (len(section.columns) - len(row))
        lead = row[0].text if grid else f"{section.title} · {row[0].text}"
        tds = [
            _cell(c, comparisons, f"{lead} · {col}", tag="td" if j else "th", compact=grid and j > 0)
            for j, (c, col) in enumerate(zip(cells, section.columns))
        ]
        body.append(f"<tr>{''.join(tds)}</tr>")
    cls = "grid ft" if grid else "ft"
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _section(section: Section, comparisons: _Comparisons, level: int = 3) -> str:
    parts = [f"<h{level}>{_e(section.title)}</h{level}>"]
    if section.note:
        parts.append(f'<p class="note">{_e(section.note)}</p>')
    if section.columns:
        parts.append(_table(section, comparisons))
    return "".join(parts)


def grids(detail: list[Section]) -> list[Section]:
    """The grids of a report's detail tables: one per list of row keys (the first column's texts)
    that some tables share, with one row per table and column that shows comparisons, and one
    column per row key; each cell is the table's own cell. A row that is one unavailable cell
    (a case that did not run) fills every column of its table with that cell."""
    found: dict[tuple[str, ...], Section] = {}
    for s in detail:
        keys = tuple(row[0].text for row in s.rows)
        compared = [j for j in range(1, len(s.columns)) if any(j < len(r) and r[j].comparison for r in s.rows)]
        for j in compared:
            grid = found.setdefault(keys, Section("grid", columns=["", *keys]))
            cells = [
                r[j] if j < len(r) else (r[1] if len(r) == 2 and r[1].status == "na" else Cell("")) for r in s.rows
            ]
            grid.rows.append([Cell(f"{s.title} · {s.columns[j]}"), *cells])
    return list(found.values())


def _flat(value: object, prefix: str = "") -> list[tuple[str, str]]:
    """A model's JSON as (dotted path, value) rows; lists and scalars are values."""
    if isinstance(value, dict):
        return [row for k, v in value.items() for row in _flat(v, f"{prefix}.{k}" if prefix else str(k))]
    return [(prefix, value if isinstance(value, str) else json.dumps(value))]


def _scalar(value: object) -> bool:
    return not isinstance(value, (dict, list)) or (isinstance(value, list) and all(map(_scalar, value)))


def environment_section(report: Report) -> Section:
    """The report's environment, and its top-level settings (scalars and lists of them), as rows."""
    data = report.root.model_dump(mode="json")
    rows = _flat({k: v for k, v in data.items() if _scalar(v)}) + _flat(data.get("environment", {}), "environment")
    return Section("environment", columns=["field", "value"], rows=[[Cell(k), Cell(v)] for k, v in rows])


def _anchor(i: int) -> str:
    return f"r{i}"


def _report(i: int, path: Path, report: Report, comparisons: _Comparisons) -> str:
    kind = kind_of(report)
    drawn = kind.sections(report.root, View())
    head = [s for s in drawn if not s.columns]
    detail = [s for s in drawn if s.columns and not s.verdicts]
    parts = [f'<section class="report" id="{_anchor(i)}"><h2>{_e(report_line(report))}</h2>']
    parts.append(f'<p class="file">{_e(report.root.kind)} · {_e(path)}</p>')
    parts += [_section(s, comparisons) for s in head]
    found = grids(detail)
    if found:
        parts.append("<h3>grid</h3>")
        parts += [_table(g, comparisons, grid=True) for g in found]
    parts += [_section(s, comparisons) for s in detail]
    parts.append(f"<details><summary>environment</summary>{_table(environment_section(report), comparisons)}</details>")
    parts.append("</section>")
    return "".join(parts)


def verdicts_section(loaded: list[tuple[Path, Report]]) -> Section:
    """Every report's verdicts in one table (each report's in its kind's order, the unavailable ones
    of every report last), coloured by each kind's ``statuses``, with install hints where an extra brings what an
    unavailable candidate misses."""
    section = Section("verdicts", columns=["report", "mode", "candidate", "vs", "verdict", "detail"], verdicts=True)
    for _, report in loaded:
        kind = kind_of(report)
        label = f"{report.root.kind} {report_line(report).partition(':')[0]}"
        for v in shown_verdicts(kind.verdicts(report.root), kind.statuses, View()):
            status = kind.statuses[v.verdict]
            hint = verdict_hint(v, status)
            detail = f"{v.detail} · install: {hint}" if hint else v.detail
            who = [Cell(label), Cell(v.mode or ""), Cell(v.candidate), Cell(v.reference or "")]
            section.rows.append([*who, Cell(v.verdict, status), Cell(detail)])
    section.rows.sort(key=lambda row: row[4].status == "na")
    return section


def render_html(
    loaded: list[tuple[Path, Report]],
    *,
    unreadable: list[str] = (),
    diff: Diff | None = None,
    title: str = "bitwise-reuse audit",
) -> str:
    """The page for ``loaded`` (path, report), naming each of ``unreadable`` (one line each) and,
    when given, drawing ``diff``; the module says what it holds."""
    comparisons = _Comparisons()
    reports = [r for _, r in loaded]
    counts = Counter(r.root.kind for r in reports)
    summary = recap(reports) or (report_line(reports[0]) if reports else "no report")
    body = [f"<h1>{_e(title)}</h1>", f'<p class="summary">{_e(summary)}</p>']
    if unreadable:
        items = "".join(f"<li>{_e(u)}</li>" for u in unreadable)
        body.append(
            f'<div class="unreadable"><h2>not rendered: {len(unreadable)} unreadable</h2><ul>{items}</ul></div>'
        )
    toc = "".join(
        f'<li><a href="#{_anchor(i)}">{_e(r.root.kind)} · {_e(p)}</a></li>' for i, (p, r) in enumerate(loaded)
    )
    kinds = ", ".join(f"{n} {k}" for k, n in counts.items())
    body.append(f"<nav><details><summary>{len(loaded)} reports: {_e(kinds)}</summary><ul>{toc}</ul></details></nav>")
    body.append(
        '<section id="verdicts"><h2>verdicts</h2>' + _table(verdicts_section(loaded), comparisons) + "</section>"
    )
    if diff is not None:
        body.append('<section id="diff"><h2>against the baseline</h2>')
        body += [_section(s, comparisons) for s in diff_sections(diff)]
        body.append("</section>")
    body += [_report(i, p, r, comparisons) for i, (p, r) in enumerate(loaded)]
    toggles = "".join(
        f'<label class="s-{s}"><input type="checkbox" name="status" value="{s}"> {_e(STATUS_NAMES[s])}</label>'
        for s in ORDER
    )
    data = json.dumps(comparisons.items, separators=(",", ":")).replace("</", "<\\/")
    return TEMPLATE.format(
        title=_e(title),
        css=(ASSETS / "report.css").read_text(),
        toggles=toggles,
        body="".join(body),
        data=data,
        js=(ASSETS / "report.js").read_text(),
    )


TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title><style>{css}</style></head>
<body>
<div id="toolbar"><input id="q" type="search" placeholder="filter rows (text)" aria-label="filter rows">
<span id="statuses">{toggles}</span><span id="shown"></span></div>
<main>{body}</main>
<aside id="detail" hidden><button id="close" aria-label="close">×</button><div id="detail-body"></div></aside>
<script type="application/json" id="comparisons">{data}</script>
<script>{js}</script>
</body></html>
"""
