"""``audit show --format json``: one JSON document for any number of reports, each with its verdicts
and the tables ``audit show`` draws, narrowed by the same ``View``. ``ShowDocument`` is the
document's model; ``audit schema --kind verdicts`` prints its JSON Schema.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from .kinds import KINDS, Report, kind_of
from .schema import Cmp
from .tables import CellStatus, Section, View, shown_verdicts, verdict_hint
from .verdict import Status


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VerdictOut(_Out):
    """One verdict, as in the verdict table: ``reference`` null when it holds against every
    reference (or the kind has none), ``mode`` null for kinds without modes; ``install``: the
    command that installs what an unavailable one misses, where an extra brings it."""

    candidate: str
    reference: str | None
    mode: str | None
    verdict: str
    status: Status
    detail: str
    install: str | None


class CellOut(_Out):
    """A table cell: its text and status; ``comparison``: the comparison it shows, if it shows one."""

    text: str
    status: CellStatus
    comparison: Cmp | None


class TableOut(_Out):
    """A detail table: each row a list of cells in the order of ``columns`` (a row of something
    that could not run may have fewer). A heading has no columns and no rows."""

    title: str
    note: str
    columns: list[str]
    rows: list[list[CellOut]]


class ReportOut(_Out):
    """One report file: its verdicts (unavailable ones last) and its detail tables
    (``comparisons``), each narrowed by ``--candidate``; ``--only-differ`` leaves equal cells
    empty and drops rows and tables left empty."""

    path: str
    kind: Literal[tuple(KINDS)]  # type: ignore[valid-type]
    op: str
    verdicts: list[VerdictOut]
    comparisons: list[TableOut]


class ShowDocument(_Out):
    """What ``audit show --format json`` prints: one entry per file, in the order given."""

    reports: list[ReportOut]


def _table(s: Section) -> TableOut:
    rows = [[CellOut(text=c.text, status=c.status, comparison=c.comparison) for c in row] for row in s.rows]
    return TableOut(title=s.title, note=s.note, columns=s.columns, rows=rows)


def report_out(path: str, report: Report, view: View = View()) -> ReportOut:
    """One report as ``audit show --format json`` gives it."""
    kind, root = kind_of(report), report.root
    verdicts = [
        VerdictOut(
            candidate=v.candidate,
            reference=v.reference,
            mode=v.mode,
            verdict=v.verdict,
            status=kind.statuses[v.verdict],
            detail=v.detail,
            install=verdict_hint(v, kind.statuses[v.verdict]),
        )
        for v in shown_verdicts(kind.verdicts(root), kind.statuses, view)
    ]
    tables = [_table(s) for s in kind.sections(root, view) if not s.verdicts]
    return ReportOut(path=path, kind=root.kind, op=root.op, verdicts=verdicts, comparisons=tables)
