"""JUnit XML of reports, for CI systems that show failing test cases (``--junit PATH``).

One ``testsuite`` per report and, with a baseline, one for the diff; every ``testcase`` is named
``classname`` = ``OP.TABLE`` (for a bitwise report ``OP.CANDIDATE vs REFERENCE``, for a chain
replay ``OP.mode M, length L``), so that a CI UI groups them by op and candidate:

- per verdict (each kind's ``verdicts``): classname ``OP.CANDIDATE``, the message the verdict line;
- per compared cell of each kind's detail tables (a candidate × case × tensor comparison, a
  chain's stage, a trajectory's step, a prior-art check): its name is the row and the column
  (``case 257 · dgate``), a failure message its counts and first differing index;
- per change and per lost entry of the diff against the baseline;
- with ``--fail-on differ``, per problem ``reports.diff.unmet`` finds (nothing compared, a
  requested candidate that did not run, or not everywhere).

A test case fails exactly when the ``--fail-on`` policy fails on it (``reports.diff.gate``): under
``differ`` a verdict or comparison whose status is a difference, and an unmet request; under
``regression`` and ``differ`` a regression or a lost entry that ``--allow-missing`` does not name.
Unavailable verdicts and comparisons are skipped with their reason. So the file has a failure
exactly when the command exits 1 on its gate.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from .changes import Change
from .diff import Diff, FailOn, unmet
from .kinds import Report, kind_of
from .tables import Cell, View
from .verdict import Status, Verdict, is_difference


def _case(suite: ET.Element, classname: str, name: str) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=classname, name=name, time="0")


def _outcome(case: ET.Element, *, fails: bool, skipped: str | None, message: str, kind: str) -> None:
    if skipped is not None:
        ET.SubElement(case, "skipped", message=skipped)
    elif fails:
        ET.SubElement(case, "failure", message=message, type=kind).text = message


def _verdict_line(op: str, v: Verdict) -> str:
    who = " ".join(x for x in (v.mode and f"mode {v.mode}:", v.candidate, v.reference and f"vs {v.reference}") if x)
    return f"{who} ({op}): {v.verdict} — {v.detail}"


def _cell_message(cell: Cell) -> str:
    c = cell.comparison
    first = f"; first differing index [{', '.join(map(str, c.first_differ))}]" if c and c.first_differ else ""
    return cell.text + first


def _report_suite(root: ET.Element, path: Path, report: Report, fail_on: FailOn) -> None:
    kind = kind_of(report)
    _, op, quick = kind.key(report.root)
    op += " (quick)" if quick else ""
    suite = ET.SubElement(root, "testsuite", name=f"{report.root.kind} {op}", file=str(path))
    differ = fail_on == "differ"
    for v in kind.verdicts(report.root):
        status: Status = kind.statuses[v.verdict]
        name = f"verdict{f' vs {v.reference}' if v.reference else ''}{f' (mode {v.mode})' if v.mode else ''}"
        case = _case(suite, f"{op}.{v.candidate}", name)
        skipped = v.detail if status == "na" else None
        _outcome(
            case, fails=differ and is_difference(status), skipped=skipped, message=_verdict_line(op, v), kind=v.verdict
        )
    for section in kind.sections(report.root, View()):
        if not section.columns or section.verdicts:
            continue
        for row in section.rows:
            key = f"{section.columns[0]} {row[0].text}"
            for column, cell in zip(section.columns[1:], row[1:]):
                if cell.status == "plain":
                    continue
                name = key if len(row) == 2 and cell.status == "na" else f"{key} · {column}"
                case = _case(suite, f"{op}.{section.title}", name)
                skipped = cell.text.removeprefix("unavailable: ") if cell.status == "na" else None
                fails = differ and is_difference(cell.status)
                _outcome(case, fails=fails, skipped=skipped, message=_cell_message(cell), kind="differ")


def _diff_suite(root: ET.Element, diff: Diff, fail_on: FailOn) -> None:
    suite = ET.SubElement(root, "testsuite", name=f"against {diff.old}")
    gated = fail_on != "none"
    for op in diff.ops:
        for c in op.changes:
            case = _case(suite, f"{op.op}.{c.candidate}", _change_name(c))
            message = f"{op.op}: {c.kind}: {_change_name(c)}: {c.old} -> {c.new}"
            _outcome(case, fails=gated and c.kind == "regression", skipped=None, message=message, kind=c.kind)
    for x in diff.lost:
        case = _case(suite, f"{x.report.partition(' ')[2]}.lost", x.what)
        _outcome(case, fails=gated and not x.allowed, skipped=None, message=x.line(), kind="lost")


def _change_name(c: Change) -> str:
    return " · ".join(x for x in (c.reference and f"vs {c.reference}", c.case and f"case {c.case}", c.tensor) if x) or (
        "availability"
    )


def junit_xml(
    written: list[tuple[Path, Report]],
    *,
    fail_on: FailOn,
    diff: Diff | None = None,
    requested: list[str] | None = None,
) -> str:
    """The JUnit document of ``written`` (path, report), the ``diff`` against the baseline (None
    without one) and, under ``differ``, ``unmet(requested)``, as the module says."""
    root = ET.Element("testsuites", name="audit")
    for path, report in written:
        _report_suite(root, path, report, fail_on)
    if diff is not None:
        _diff_suite(root, diff, fail_on)
    if fail_on == "differ":
        problems = unmet([r for _, r in written], requested or [])
        if problems:
            suite = ET.SubElement(root, "testsuite", name="requested")
            for line in problems:
                _outcome(_case(suite, "gate", line), fails=True, skipped=None, message=line, kind="unmet")
    for suite in root:
        cases = list(suite)
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(sum(c.find("failure") is not None for c in cases)))
        suite.set("errors", "0")
        suite.set("skipped", str(sum(c.find("skipped") is not None for c in cases)))
    for attr in ("tests", "failures", "errors", "skipped"):
        root.set(attr, str(sum(int(s.get(attr)) for s in root)))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
