"""``audit diff``: what changed between two sets of reports, and whether anything regressed.

Reports are matched by kind and op (and, for prior-art, the ``quick`` flag). A pure function of
the two sets gives a ``Diff``: the environment differences, candidates and cases that appeared or
disappeared, and every change of state, classified as

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

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from .io import ReportError, load_report
from .schema import (
    KINDS,
    BitwiseReport,
    CaseComparison,
    ChainReplay,
    ChainReport,
    Cmp,
    Environment,
    PriorArtReport,
    Report,
    Unavailable,
)
from .parallel import ParallelReport
from .verdict import pairs

ChangeKind = Literal["regression", "improvement", "change", "noise"]


class DiffInputError(ValueError):
    """OLD or NEW cannot be diffed (exit status 2)."""


class EnvChange(BaseModel):
    field: str
    old: str
    new: str


class Change(BaseModel):
    kind: ChangeKind
    candidate: str
    reference: str | None = None  # bitwise: the other side of the comparison; prior-art: the mode
    case: str | None = None
    tensor: str | None = None
    old: str
    new: str


class Latency(BaseModel):
    mode: str
    candidate: str
    size: str
    fwd_ratio: float  # NEW / OLD
    fwd_bwd_ratio: float


class OpDiff(BaseModel):
    kind: str
    op: str
    old_file: str
    new_file: str
    environment: list[EnvChange] = []
    appeared: list[str] = []
    disappeared: list[str] = []
    changes: list[Change] = []
    latency: list[Latency] = []
    unknown_repeatability: list[Literal["old", "new"]] = []


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


# -- loading -------------------------------------------------------------------------------------


def _key(report: Report) -> tuple[str, str, bool]:
    """(kind, op, quick): what a report is matched by; a parallel report's op names its layout."""
    r = report.root
    op = f"{r.op} {r.layout}" if isinstance(r, ParallelReport) else r.op
    return r.kind, op, bool(getattr(r, "quick", False))


def _is_report_json(path: Path) -> bool:
    try:
        return json.loads(path.read_text()).get("kind") in KINDS
    except (OSError, ValueError, AttributeError):
        return False


def load_set(path: Path) -> dict[tuple[str, str, bool], tuple[Path, Report]]:
    """The reports in a file or a directory (its ``*.json`` files whose ``kind`` is a report kind;
    other JSON, such as benchmark results, is left out), keyed by (kind, op, quick)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.glob("*.json") if _is_report_json(p))
        if not files:
            raise DiffInputError(f"{path}: no report in this directory")
    elif path.exists():
        files = [path]
    else:
        raise DiffInputError(f"{path}: no such file or directory")
    found: dict[tuple[str, str, bool], tuple[Path, Report]] = {}
    for f in files:
        try:
            report = load_report(f)
        except ReportError as exc:
            raise DiffInputError(str(exc)) from None
        key = _key(report)
        if key in found:
            raise DiffInputError(f"{found[key][0]} and {f} are both {key[0]} reports for {key[1]}: give one of them")
        found[key] = (f, report)
    return found


# -- environment ---------------------------------------------------------------------------------


def _env_fields(env: Environment) -> dict[str, str]:
    fields = {k: json.dumps(getattr(env, k)) for k in ("gpu", "capability", "torch", "cuda", "python", "tf32")}
    fields |= {f"libraries.{k}": json.dumps(v) for k, v in env.libraries.items()}
    fields |= {f"mode_environment.{m}": json.dumps(v, sort_keys=True) for m, v in env.mode_environment.items()}
    return fields


def environment_changes(old: Environment, new: Environment) -> list[EnvChange]:
    a, b = _env_fields(old), _env_fields(new)
    absent = "(absent)"
    return [
        EnvChange(field=k, old=a.get(k, absent), new=b.get(k, absent))
        for k in dict.fromkeys([*a, *b])
        if a.get(k) != b.get(k)
    ]


# -- bitwise -------------------------------------------------------------------------------------


def _state(c: Cmp) -> str:
    if c.equal:
        text = "equal"
    else:
        text = f"error: {c.error}" if c.error else f"{c.differ:,}/{c.numel:,} differ"
    if c.repeatable is False:
        text = f"nondeterministic, {text} (runs differ in {c.repeat_differ:,})"
    return text


def classify(old: Cmp, new: Cmp) -> ChangeKind | None:
    """How one comparison changed between two reports (None: it did not)."""
    if old.repeatable is True and new.repeatable is False:
        return "regression"
    if old.repeatable is False and new.repeatable is True:
        return "improvement"
    noisy = old.repeatable is False or new.repeatable is False
    if old.equal and not new.equal:
        return "noise" if noisy else "regression"
    if not old.equal and new.equal:
        return "noise" if noisy else "improvement"
    if old.differ != new.differ or old.error != new.error:
        return "noise" if noisy else "change"
    return None


def _cases_of(report: BitwiseReport, name: str, ref: str) -> dict[str, CaseComparison | Unavailable] | None:
    """The comparison of ``name`` with ``ref`` in either orientation (None if absent)."""
    for a, b in ((name, ref), (ref, name)):
        result = report.results.get(a)
        if result is not None and not isinstance(result, Unavailable):
            cases = result.comparisons().get(b)
            if cases is not None:
                return cases
    return None


def _availability(
    name: str, ref: str | None, case: str | None, old_reason: str | None, new_reason: str | None
) -> list[Change]:
    if (old_reason is None) == (new_reason is None):
        return []
    kind: ChangeKind = "regression" if new_reason is not None else "improvement"
    old = f"unavailable: {old_reason}" if old_reason else "available"
    new = f"unavailable: {new_reason}" if new_reason else "available"
    return [Change(kind=kind, candidate=name, reference=ref, case=case, old=old, new=new)]


def _state_change(name: str, ref: str | None, case: str | None, tensor: str, old: Cmp, new: Cmp) -> list[Change]:
    """One comparison's change of state between the reports (``classify``), or none."""
    kind = classify(old, new)
    if kind is None:
        return []
    return [
        Change(kind=kind, candidate=name, reference=ref, case=case, tensor=tensor, old=_state(old), new=_state(new))
    ]


def _bitwise(old: BitwiseReport, new: BitwiseReport, diff: OpDiff) -> None:
    diff.appeared += [f"candidate {n}" for n in new.results if n not in old.results]
    diff.disappeared += [f"candidate {n}" for n in old.results if n not in new.results]
    diff.appeared += [f"case {c}" for c in new.cases if c not in old.cases]
    diff.disappeared += [f"case {c}" for c in old.cases if c not in new.cases]
    for name in (n for n in new.results if n in old.results):
        o, n = old.results[name], new.results[name]
        diff.changes += _availability(
            name, None, None, getattr(o, "unavailable", None), getattr(n, "unavailable", None)
        )
    unknown = {"old": False, "new": False}
    for name, ref, new_cases in pairs(new):
        old_cases = _cases_of(old, name, ref)
        if old_cases is None:
            continue
        for case in (c for c in new_cases if c in old_cases):
            oc, nc = old_cases[case], new_cases[case]
            diff.changes += _availability(
                name, ref, case, getattr(oc, "unavailable", None), getattr(nc, "unavailable", None)
            )
            if isinstance(oc, Unavailable) or isinstance(nc, Unavailable):
                continue
            old_t, new_t = oc.by_tensor(), nc.by_tensor()
            for tensor in (t for t in new_t if t in old_t):
                a, b = old_t[tensor], new_t[tensor]
                unknown["old"] |= a.repeatable is None
                unknown["new"] |= b.repeatable is None
                diff.changes += _state_change(name, ref, case, tensor, a, b)
    diff.unknown_repeatability = [side for side, flag in unknown.items() if flag]  # type: ignore[misc]


# -- chain replay --------------------------------------------------------------------------------


def _replays(report: ChainReport) -> dict[tuple[str, str], ChainReplay | str]:
    """(mode, length) -> the replay, or why it did not run (length ``*``: the whole mode)."""
    found: dict[tuple[str, str], ChainReplay | str] = {}
    for mode, result in report.results.items():
        if isinstance(result, Unavailable):
            found[(mode, "*")] = result.unavailable
            continue
        for length, replay in result.lengths.items():
            found[(mode, length)] = replay.unavailable if isinstance(replay, Unavailable) else replay
    return found


def _stage_comparisons(replay: ChainReplay) -> dict[tuple[str, str], Cmp]:
    """(stage, comparison or gradient) -> Cmp."""
    found = {}
    for s in replay.stages:
        found[(s.stage, "chained")] = s.chained_vs_provider
        found[(s.stage, "isolated")] = s.isolated_vs_provider
        found.update({(s.stage, f"d{name}"): c for name, c in (s.grads or {}).items()})
    return found


def _chain(old: ChainReport, new: ChainReport, diff: OpDiff) -> None:
    """Per mode, length, stage and comparison: availability and state changes (``reference`` is
    the mode, ``case`` the length, ``candidate`` the stage)."""
    old_r, new_r = _replays(old), _replays(new)
    diff.appeared += [f"mode {m}, length {n}" for m, n in new_r if (m, n) not in old_r]
    diff.disappeared += [f"mode {m}, length {n}" for m, n in old_r if (m, n) not in new_r]
    for mode, length in (k for k in new_r if k in old_r):
        o, n = old_r[(mode, length)], new_r[(mode, length)]
        diff.changes += _availability(
            "chain", mode, length, o if isinstance(o, str) else None, n if isinstance(n, str) else None
        )
        if isinstance(o, str) or isinstance(n, str):
            continue
        old_stages = {s.stage: s for s in o.stages}
        for s in (s for s in n.stages if s.stage in old_stages):
            diff.changes += _availability(
                s.stage,
                mode,
                length,
                getattr(old_stages[s.stage].candidate, "unavailable", None),
                getattr(s.candidate, "unavailable", None),
            )
        old_c = _stage_comparisons(o)
        for (stage, tensor), b in _stage_comparisons(n).items():
            if (stage, tensor) in old_c:
                diff.changes += _state_change(stage, mode, length, tensor, old_c[(stage, tensor)], b)


# -- prior art -----------------------------------------------------------------------------------


def _prior_art(old: PriorArtReport, new: PriorArtReport, diff: OpDiff) -> None:
    diff.appeared += [f"mode {m}" for m in new.results if m not in old.results]
    diff.disappeared += [f"mode {m}" for m in old.results if m not in new.results]
    for mode in (m for m in new.results if m in old.results):
        om, nm = old.results[mode], new.results[mode]
        diff.changes += _availability(
            f"mode {mode}", mode, None, getattr(om, "unavailable", None), getattr(nm, "unavailable", None)
        )
        if isinstance(om, Unavailable) or isinstance(nm, Unavailable):
            continue
        diff.appeared += [f"{n} in mode {mode}" for n in nm if n not in om]
        diff.disappeared += [f"{n} in mode {mode}" for n in om if n not in nm]
        for name in (n for n in nm if n in om):
            oc, nc = om[name], nm[name]
            diff.changes += _availability(
                name, mode, None, getattr(oc, "unavailable", None), getattr(nc, "unavailable", None)
            )
            if isinstance(oc, Unavailable) or isinstance(nc, Unavailable):
                continue
            was, now = oc.batch_invariance.batch_invariant, nc.batch_invariance.batch_invariant
            if was != now:
                label = {True: "batch-invariant", False: "not invariant"}
                diff.changes.append(
                    Change(
                        kind="regression" if was else "improvement",
                        candidate=name,
                        reference=mode,
                        old=label[was],
                        new=label[now],
                    )
                )
            for size in (s for s in nc.accuracy_latency if s in oc.accuracy_latency):
                a, b = oc.accuracy_latency[size], nc.accuracy_latency[size]
                diff.latency.append(
                    Latency(
                        mode=mode,
                        candidate=name,
                        size=size,
                        fwd_ratio=b.fwd_us / a.fwd_us if a.fwd_us else float("nan"),
                        fwd_bwd_ratio=b.fwd_bwd_us / a.fwd_bwd_us if a.fwd_bwd_us else float("nan"),
                    )
                )


# -- the whole diff -----------------------------------------------------------------------------


def _parallel(old: ParallelReport, new: ParallelReport, diff: OpDiff) -> None:
    """Per candidate, case, reduction (as ``reference``) and tensor; a changed layout, rank count
    or backend is an environment difference."""
    diff.environment += [
        EnvChange(field=f, old=str(getattr(old, f)), new=str(getattr(new, f)))
        for f in ("layout", "ranks", "backend")
        if getattr(old, f) != getattr(new, f)
    ]
    diff.appeared += [f"candidate {n}" for n in new.results if n not in old.results]
    diff.disappeared += [f"candidate {n}" for n in old.results if n not in new.results]
    for name in (n for n in new.results if n in old.results):
        o, n = old.results[name], new.results[name]
        diff.changes += _availability(
            name, None, None, getattr(o, "unavailable", None), getattr(n, "unavailable", None)
        )
        if isinstance(o, Unavailable) or isinstance(n, Unavailable):
            continue
        for case in (c for c in n.cases if c in o.cases):
            for how in ("native", "fixed_order"):
                old_t, new_t = getattr(o.cases[case], how).by_tensor(), getattr(n.cases[case], how).by_tensor()
                for tensor in (t for t in new_t if t in old_t):
                    kind = classify(old_t[tensor], new_t[tensor])
                    if kind is not None:
                        diff.changes.append(
                            Change(
                                kind=kind,
                                candidate=name,
                                reference=how,
                                case=case,
                                tensor=tensor,
                                old=_state(old_t[tensor]),
                                new=_state(new_t[tensor]),
                            )
                        )


DIFFS = {BitwiseReport: _bitwise, PriorArtReport: _prior_art, ChainReport: _chain, ParallelReport: _parallel}


def diff_sets(old: dict, new: dict, old_name: str = "OLD", new_name: str = "NEW") -> Diff:
    """The diff of two report sets as ``load_set`` returns them. Raises DiffInputError when no
    report of one matches a report of the other (for two single files: when their kinds differ)."""
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
        DIFFS[type(n)](o, n, op)
        result.ops.append(op)
    return result


def diff_paths(old: Path, new: Path) -> Diff:
    return diff_sets(load_set(old), load_set(new), str(old), str(new))


FailOn = Literal["none", "regression", "differ"]


def gate(
    written: list[Report], paths: list[Path], baseline: dict | None, fail_on: FailOn, baseline_name: str = "baseline"
) -> tuple[Diff | None, bool]:
    """The baseline gate after a run: the diff of the reports just written against the baseline
    set (None without one), and whether the run fails: on ``regression``, when the diff has one; on
    ``differ``, also when any written report has a comparison that is not bitwise equal (or a
    candidate that is not batch-invariant)."""
    from .verdict import any_difference

    diff = None
    if baseline is not None:
        new = {_key(r): (p, r) for p, r in zip(paths, written)}
        diff = diff_sets({k: v for k, v in baseline.items() if k in new}, new, baseline_name, "this run")
    failed = fail_on != "none" and diff is not None and diff.regressed
    failed |= fail_on == "differ" and any(any_difference(r) for r in written)
    return diff, failed


def baselined_ops(baseline: dict, kind: str, ops: list[str], quick: bool = False) -> list[str]:
    """The selected ops that have a report of ``kind`` (and the same ``quick``) in the baseline set."""
    return [op for op in ops if (kind, op, quick) in baseline]
