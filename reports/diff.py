"""``audit diff``: what changed between two sets of reports, and whether anything regressed.

A pure function of two validated report sets (``reports.io.load_set`` reads them) gives a
``Diff``. Reports are matched by their kind's key (kind and op; prior-art also the ``quick`` flag,
parallel the layout). Two matched reports of different problems (their kind's ``problem``: a
chain replay's block, backward, lengths or stage candidates) are not compared: ``DifferentProblem``,
unless the caller allows it, and then the settings that differ are listed with the environment.
Each matched pair gives an ``OpDiff`` from its kind's diff: the environment differences, what
appeared, what was lost, and every change of state, classified by ``reports.changes.TABLE``
(regression, improvement, change, noise).

Coverage is part of the verdict: a report, mode, candidate, case or tensor comparison of OLD that
NEW lacks is **lost**, and a lost entry is a regression unless ``allow_missing`` names it (a
candidate, case, mode, op or tensor name, or ``all``). ``Diff.regressed`` is true when there is a
regression or a lost entry not allowed. A comparison without a ``repeatable`` field (the example
reports, or ``--repeats 1``) is of unknown repeatability; the diff says so once per side. Exit
codes (Megatron's convention): 0 no regression, 1 a regression, 2 unusable input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, computed_field

from .changes import ChangeKind, EnvChange, Lost, OpDiff, environment_changes
from .kinds import Key, Report, ReportSet, kind_of
from .verdict import is_difference

ALL = "all"  # --allow-missing all: every loss was intended


class DiffInputError(ValueError):
    """OLD and NEW cannot be compared (exit status 2)."""


class DifferentProblem(DiffInputError):
    """Two matched reports solved different problems; the message names each setting that differs."""


class Diff(BaseModel):
    """Every matched pair's ``OpDiff``, the reports only one side has, and the verdict:
    ``counts`` per kind of change, ``lost`` (every lost entry, reports included), ``regressed``."""

    old: str
    new: str
    ops: list[OpDiff]
    lost_reports: list[Lost] = []  # reports of OLD with no counterpart in NEW
    only_new: list[str] = []  # reports of NEW with no counterpart in OLD
    allow_missing: list[str] = []  # names whose loss was intended

    @computed_field  # type: ignore[prop-decorator]
    @property
    def only_old(self) -> list[str]:
        """The files of the lost reports."""
        return [x.what for x in self.lost_reports]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def lost(self) -> list[Lost]:
        """Every lost entry: whole reports first, then per matched report."""
        return [*self.lost_reports, *(x for o in self.ops for x in o.lost)]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def counts(self) -> dict[ChangeKind, int]:
        """How many changes of each kind; ``lost`` counts every lost entry, allowed or not."""
        found = {k: sum(1 for o in self.ops for c in o.changes if c.kind == k) for k in get_args(ChangeKind)}
        return found | {"lost": len(self.lost)}

    @computed_field  # type: ignore[prop-decorator]
    @property
    def regressed(self) -> bool:
        """A regression, or a lost entry that ``allow_missing`` does not name."""
        return self.count("regression") > 0 or any(not x.allowed for x in self.lost)

    def count(self, kind: ChangeKind) -> int:
        return self.counts[kind]

    def first(self, kind: ChangeKind = "regression") -> str | None:
        """The first change of ``kind``, as one line naming the report, the pair, the case, the
        tensor (a kernel change: the pass) and the old and new states (None when there is none)."""
        for op in self.ops:
            for c in op.changes:
                if c.kind == kind:
                    where = ", ".join(
                        x for x in (c.reference and f"vs {c.reference}", c.case and f"case {c.case}", c.tensor) if x
                    )
                    return f"{op.op}: {c.candidate}{' ' + where if where else ''}: {c.old} -> {c.new}"
        return None

    def first_failure(self) -> str | None:
        """Why the diff regressed, as one line: its first regression, else its first loss that
        ``allow_missing`` does not name, with the name that would accept it; None when it did not
        regress."""
        if (first := self.first()) is not None:
            return first
        return next((x.line() for x in self.lost if not x.allowed), None)

    def summary(self) -> str:
        """One sentence: the count of each kind, how many losses were allowed, the matched reports."""
        plural = {
            "regression": "regressions",
            "improvement": "improvements",
            "change": "changes",
            "noise": "noise",
            "kernel change": "kernel changes",
        }
        parts = [f"{self.count(k):,} {plural[k] if self.count(k) != 1 else k}" for k in plural]
        allowed = sum(x.allowed for x in self.lost)
        parts.append(f"{self.count('lost'):,} lost" + (f" ({allowed:,} allowed by --allow-missing)" if allowed else ""))
        return f"{', '.join(parts)} in {len(self.ops)} matched report{'s' if len(self.ops) != 1 else ''}"


def diff_json_schema() -> dict[str, Any]:
    """The JSON Schema of ``audit diff -f json`` (``Diff`` as serialized, computed fields included)."""
    return Diff.model_json_schema(mode="serialization")


def problem_differences(old: dict[str, object], new: dict[str, object]) -> list[EnvChange]:
    """The settings (a kind's ``problem``) in which two problems differ, values as JSON."""
    absent = "(absent)"
    return [
        EnvChange(field=k, old=json.dumps(old.get(k, absent)), new=json.dumps(new.get(k, absent)))
        for k in dict.fromkeys([*old, *new])
        if old.get(k, absent) != new.get(k, absent)
    ]


def input_differences(old: Any, new: Any) -> list[EnvChange]:
    """The cases (a chain's or trajectory's lengths) for which both reports record their inputs'
    ``inputs_sha256`` and the two differ: the comparisons of such a case were made on other data, so
    the reports solved different problems there. A case only one of them ran is no difference."""
    a, b = getattr(old, "inputs_sha256", None) or {}, getattr(new, "inputs_sha256", None) or {}
    return [EnvChange(field=f"inputs_sha256[{k}]", old=a[k], new=b[k]) for k in a if k in b and a[k] != b[k]]


def different_problem(kind: str, found: list[EnvChange], *, old: object, new: object) -> DifferentProblem:
    """The error for two reports of ``kind`` (named ``old`` and ``new``) whose problems differ as
    ``found`` says."""
    differs = "; ".join(f"{d.field} {d.old} vs {d.new}" for d in found)
    return DifferentProblem(
        f"{old} and {new} are {kind} reports of different problems ({differs}); "
        "--allow-different-problem compares them anyway"
    )


def _allowed(entry: Lost, allow_missing: list[str]) -> bool:
    return ALL in allow_missing or any(n in allow_missing for n in entry.names)


def diff_sets(
    old: ReportSet,
    new: ReportSet,
    *,
    old_name: str = "OLD",
    new_name: str = "NEW",
    allow_missing: list[str] | None = None,
    allow_different_problem: bool = False,
) -> Diff:
    """The diff of two report sets. Raises DiffInputError when no report of one matches a report of
    the other (for two single files: when their kinds differ), and DifferentProblem when two
    matched reports solved different problems, unless ``allow_different_problem``."""
    common = [k for k in new if k in old]
    if not common:
        kinds_old, kinds_new = {k[0] for k in old}, {k[0] for k in new}
        why = (
            f"kinds differ ({', '.join(sorted(kinds_old))} vs {', '.join(sorted(kinds_new))})"
            if kinds_old.isdisjoint(kinds_new)
            else "no op in common"
        )
        raise DiffInputError(f"nothing to compare: {why}")
    allow = list(allow_missing or [])
    result = Diff(
        old=old_name,
        new=new_name,
        ops=[],
        lost_reports=[_lost_report(k, old[k][0]) for k in old if k not in new],
        only_new=[str(new[k][0]) for k in new if k not in old],
        allow_missing=allow,
    )
    for key in common:
        result.ops.append(_op_diff(key, old[key], new[key], allow_different_problem=allow_different_problem))
    for entry in result.lost:
        entry.allowed = _allowed(entry, allow)
    return result


def _lost_report(key: Key, path: Path) -> Lost:
    kind, op, quick = key
    report = f"{kind} {op}" + (" (quick)" if quick else "")
    return Lost(report=report, what=str(path), names=[op], old=f"a {report} report")


def _op_diff(key: Key, old: tuple[Path, Report], new: tuple[Path, Report], *, allow_different_problem: bool) -> OpDiff:
    (old_path, old_report), (new_path, new_report) = old, new
    op = OpDiff(
        kind=key[0],
        op=key[1] + (" (quick)" if key[2] else ""),
        old_file=str(old_path),
        new_file=str(new_path),
        environment=environment_changes(old_report.root.environment, new_report.root.environment),
    )
    kind = kind_of(new_report)
    problem = problem_differences(kind.problem(old_report.root), kind.problem(new_report.root))
    problem += input_differences(old_report.root, new_report.root)
    if problem and not allow_different_problem:
        raise different_problem(key[0], problem, old=old_path, new=new_path)
    op.environment += problem
    kind.diff(old_report.root, new_report.root, op)
    return op


FailOn = Literal["none", "regression", "differ", "kernel-change"]


def _named(name: str, requested: str) -> bool:
    """Whether a report's candidate ``name`` is the ``--candidate`` ``requested`` (under any mode)."""
    return name == requested or name.startswith(requested + "[")


def unmet(written: list[Report], requested: list[str]) -> list[str]:
    """What ``--fail-on differ`` fails on besides a difference, one line each: a report in which
    nothing was compared (no candidate ran), a requested candidate that a report names but that
    did not run there, and one that ran but not everywhere the report asked (its kind's
    ``incomplete``: a case, a length)."""
    problems = []
    for report in written:
        kind, root = kind_of(report), report.root
        ran = kind.ran(root)
        where = f"{root.kind} {kind.key(root)[1]}"
        if not ran:
            problems.append(f"{where}: nothing was compared (no candidate ran)")
            continue
        gaps = kind.incomplete(root)
        for wanted in requested:
            named = [n for n in kind.candidates(root) if _named(n, wanted)]
            if named and not any(_named(n, wanted) for n in ran):
                problems.append(f"{where}: the requested candidate {wanted} did not run")
                continue
            problems += [
                f"{where}: the requested candidate {wanted} did not run everywhere: {why}"
                for name, why in gaps.items()
                if _named(name, wanted)
            ]
    return problems


def _first_difference(report: Report) -> str:
    """The first verdict of ``report`` that is a difference, as a line."""
    kind = kind_of(report)
    v = next(v for v in kind.verdicts(report.root) if is_difference(kind.statuses[v.verdict]))
    who = " ".join(x for x in (v.mode and f"mode {v.mode}:", v.candidate, v.reference and f"vs {v.reference}") if x)
    return f"{report.root.kind} {kind.key(report.root)[1]}: {who}: {v.verdict} ({v.detail})"


def gate(
    written: list[Report],
    paths: list[Path],
    baseline: ReportSet | None,
    fail_on: FailOn,
    *,
    baseline_name: str = "baseline",
    requested: list[str] | None = None,
    allow_missing: list[str] | None = None,
    allow_different_problem: bool = False,
) -> tuple[Diff | None, list[str]]:
    """The baseline gate after a run: the diff of the reports just written against the baseline
    set (None without one), and why the run fails, one line each (empty: it passes).

    - ``regression`` (and ``differ`` and ``kernel-change``): the diff regressed: a regression, or
      coverage of the baseline lost and not named by ``allow_missing``;
    - ``kernel-change``, also: a kernel change against the baseline (whose reports need kernel
      fingerprints: ``unfingerprinted``), even where every bit stayed equal;
    - ``differ``, also: any written report with a verdict that is a difference (its kind's
      ``any_difference``; the first is named), in which nothing was compared, or in which a
      ``requested`` candidate did not run (``unmet``).

    Raises DifferentProblem (a DiffInputError) as ``diff_sets`` does."""
    diff = None
    if baseline is not None:
        new = {kind_of(r).key(r.root): (p, r) for p, r in zip(paths, written)}
        diff = diff_sets(
            {k: v for k, v in baseline.items() if k in new},
            new,
            old_name=baseline_name,
            new_name="this run",
            allow_missing=allow_missing,
            allow_different_problem=allow_different_problem,
        )
    why: list[str] = []
    if fail_on != "none" and diff is not None and diff.regressed:
        why.append(f"against {baseline_name}: {diff.summary()}; first: {diff.first_failure()}")
    if fail_on == "kernel-change" and diff is not None and diff.count("kernel change"):
        n = diff.count("kernel change")
        why.append(
            f"against {baseline_name}: {n} kernel change{'s' if n != 1 else ''}; first: {diff.first('kernel change')}"
        )
    if fail_on == "differ":
        why += [_first_difference(r) for r in written if kind_of(r).any_difference(r.root)]
        why += unmet(written, requested or [])
    return diff, why


def unfingerprinted(baseline: ReportSet, keys: list[Key]) -> list[str]:
    """The files of the baseline reports under ``keys`` that have no kernel fingerprints (only
    bitwise reports record them)."""
    return [str(baseline[k][0]) for k in keys if getattr(baseline[k][1].root, "kernel_names", None) is None]


def baselined_ops(baseline: ReportSet, kind: str, ops: list[str], quick: bool = False) -> list[str]:
    """The selected ops that have a report of ``kind`` (and the same ``quick``) in the baseline set."""
    return [op for op in ops if (kind, op, quick) in baseline]
