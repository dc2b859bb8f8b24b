"""``audit diff``: what changed between two sets of reports, and whether anything regressed.

A pure function of two validated report sets (``reports.io.load_set`` reads them) gives a
``Diff``. Reports are matched by their kind's key (kind and op; prior-art also the ``quick`` flag,
parallel the layout); each matched pair gives an ``OpDiff`` from its kind's diff: the environment
differences, candidates and cases that appeared or disappeared, and every change of state,
classified (``reports.changes``) as

- ``regression``: a bitwise-equal comparison now differs; a repeatable one is no longer
  repeatable; an available candidate or case is now unavailable; a batch-invariant candidate is no
  longer invariant;
- ``improvement``: the reverse of each;
- ``change``: the count of differing elements changed on a comparison not known to be
  non-repeatable;
- ``noise``: any change on a comparison that is not repeatable on either side; never a regression.

A comparison without a ``repeatable`` field (the example reports, or ``--repeats 1``) is of unknown
repeatability; the diff says so once per side. Exit codes (Megatron's convention): 0 no regression,
1 a regression, 2 unusable input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from .changes import ChangeKind, OpDiff, environment_changes
from .kinds import Report, ReportSet, kind_of


class DiffInputError(ValueError):
    """OLD and NEW have no report in common (exit status 2)."""


class Diff(BaseModel):
    old: str
    new: str
    ops: list[OpDiff]
    only_old: list[str] = []  # reports with no counterpart
    only_new: list[str] = []

    def count(self, kind: ChangeKind) -> int:
        return sum(1 for o in self.ops for c in o.changes if c.kind == kind)

    @property
    def regressed(self) -> bool:
        return self.count("regression") > 0

    def summary(self) -> str:
        plural = {"regression": "regressions", "improvement": "improvements", "change": "changes", "noise": "noise"}
        parts = [f"{self.count(k)} {plural[k] if self.count(k) != 1 else k}" for k in plural]
        return f"{', '.join(parts)} in {len(self.ops)} matched report{'s' if len(self.ops) != 1 else ''}"


def diff_sets(old: ReportSet, new: ReportSet, *, old_name: str = "OLD", new_name: str = "NEW") -> Diff:
    """The diff of two report sets. Raises DiffInputError when no report of one matches a report of
    the other (for two single files: when their kinds differ)."""
    common = [k for k in new if k in old]
    if not common:
        kinds_old, kinds_new = {k[0] for k in old}, {k[0] for k in new}
        why = (
            f"kinds differ ({', '.join(sorted(kinds_old))} vs {', '.join(sorted(kinds_new))})"
            if kinds_old.isdisjoint(kinds_new)
            else "no op in common"
        )
        raise DiffInputError(f"nothing to compare: {why}")
    result = Diff(
        old=old_name,
        new=new_name,
        ops=[],
        only_old=[str(old[k][0]) for k in old if k not in new],
        only_new=[str(new[k][0]) for k in new if k not in old],
    )
    for key in common:
        (old_path, old_report), (new_path, new_report) = old[key], new[key]
        o, n = old_report.root, new_report.root
        op = OpDiff(
            kind=key[0],
            op=key[1] + (" (quick)" if key[2] else ""),
            old_file=str(old_path),
            new_file=str(new_path),
            environment=environment_changes(o.environment, n.environment),
        )
        kind_of(new_report).diff(o, n, op)
        result.ops.append(op)
    return result


FailOn = Literal["none", "regression", "differ"]


def gate(
    written: list[Report],
    paths: list[Path],
    baseline: ReportSet | None,
    fail_on: FailOn,
    baseline_name: str = "baseline",
) -> tuple[Diff | None, bool]:
    """The baseline gate after a run: the diff of the reports just written against the baseline
    set (None without one), and whether the run fails: on ``regression``, when the diff has one; on
    ``differ``, also when any written report has a verdict that is a difference (its kind's
    ``any_difference``: a comparison not bitwise equal, a candidate not batch-invariant, ...)."""
    diff = None
    if baseline is not None:
        new = {kind_of(r).key(r.root): (p, r) for p, r in zip(paths, written)}
        diff = diff_sets(
            {k: v for k, v in baseline.items() if k in new}, new, old_name=baseline_name, new_name="this run"
        )
    failed = fail_on != "none" and diff is not None and diff.regressed
    failed |= fail_on == "differ" and any(kind_of(r).any_difference(r.root) for r in written)
    return diff, failed


def baselined_ops(baseline: ReportSet, kind: str, ops: list[str], quick: bool = False) -> list[str]:
    """The selected ops that have a report of ``kind`` (and the same ``quick``) in the baseline set."""
    return [op for op in ops if (kind, op, quick) in baseline]
