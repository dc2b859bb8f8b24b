"""Verdicts: pure functions from a validated report to one decision per candidate.

Bitwise reports give one verdict per candidate and reference, each pair once (A vs B, not also
B vs A), decided over every case:
- ``reusable``: the output and every gradient bitwise equal in every case, and repeatable (or
  repeatability not checked, which the detail says);
- ``forward only``: the output equal everywhere, some gradient stably different;
- ``differs``: the output stably different in some case (the detail names every differing tensor
  and the smallest case where it first differs);
- ``nondeterministic``: some comparison is not repeatable, so its differences are not a stable
  property of the kernel (the detail names those tensors);
- ``unavailable``: the candidate did not run, or some case did not and no difference was found in
  the others (the detail gives the reason).

Prior-art reports give one verdict per mode and candidate: ``batch-invariant``, ``not invariant``
(which check and which tensors) or ``unavailable``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .parallel import ParallelReport, ParallelVerdict, decide
from .schema import BitwiseReport, CaseComparison, PriorArtCandidate, PriorArtReport, Report, Unavailable

BitwiseVerdict = Literal["reusable", "forward only", "differs", "nondeterministic", "unavailable"]
PriorArtVerdict = Literal["batch-invariant", "not invariant", "unavailable"]


@dataclass(frozen=True)
class Verdict:
    candidate: str
    reference: str | None  # None: the verdict holds against every reference (or a prior-art mode)
    verdict: BitwiseVerdict | PriorArtVerdict | ParallelVerdict
    detail: str
    mode: str | None = None  # prior-art only


def pairs(report: BitwiseReport) -> list[tuple[str, str, dict[str, CaseComparison | Unavailable]]]:
    """(candidate, reference, cases) for every comparison in the report, each unordered pair once."""
    seen: set[frozenset[str]] = set()
    out = []
    for name, result in report.results.items():
        if isinstance(result, Unavailable):
            continue
        for ref, cases in result.comparisons().items():
            if frozenset((name, ref)) in seen:
                continue
            seen.add(frozenset((name, ref)))
            out.append((name, ref, cases))
    return out


def _join(items) -> str:
    return ", ".join(dict.fromkeys(items))


def _decide(cases: dict[str, CaseComparison | Unavailable]) -> tuple[BitwiseVerdict, str]:
    ordered = sorted(cases.items(), key=lambda kv: int(kv[0]))
    missing = [(c, r.unavailable) for c, r in ordered if isinstance(r, Unavailable)]
    ran = [(c, r) for c, r in ordered if isinstance(r, CaseComparison)]
    if not ran:
        return "unavailable", f"no case ran: {missing[0][1]}" if missing else "no case ran"
    stable: dict[str, str] = {}  # tensor -> first case where it differs repeatably (or not checked)
    noisy: dict[str, int] = {}  # tensor -> most elements differing between runs
    unchecked = False
    for case, cmp in ran:
        for tensor, c in cmp.by_tensor().items():
            unchecked |= c.repeatable is None
            if c.repeatable is False:
                noisy[tensor] = max(noisy.get(tensor, 0), c.repeat_differ or 0)
            elif not c.equal:
                stable.setdefault(tensor, case)
    gaps = f"; case {_join(c for c, _ in missing)} unavailable: {missing[0][1]}" if missing else ""
    order = list(dict.fromkeys(t for _, cmp in ran for t in cmp.by_tensor()))
    firsts = _join(f"{t} from case {stable[t]}" for t in order if t in stable)
    if any(t.startswith("out") for t in stable):
        also = f"; not repeatable: {_join(t for t in order if t in noisy)}" if noisy else ""
        return "differs", f"{firsts}{also}{gaps}"
    if noisy:
        detail = (
            f"{_join(t for t in order if t in noisy)} not repeatable "
            f"(up to {max(noisy.values()):,} elements differ between runs)"
        )
        return "nondeterministic", detail + (f"; stable differences: {firsts}" if stable else "") + gaps
    if stable:
        return "forward only", f"output equal in every case; {firsts}{gaps}"
    equal = f"{_join(order)} bitwise equal in cases {_join(c for c, _ in ran)}"
    if missing:
        return "unavailable", f"{equal}{gaps}"
    return "reusable", equal + (" (repeatability not checked)" if unchecked else ", repeatable")


def bitwise_verdicts(report: BitwiseReport) -> list[Verdict]:
    """One verdict per candidate and reference (each pair once); one per unavailable candidate."""
    verdicts = [
        Verdict(name, None, "unavailable", result.unavailable)
        for name, result in report.results.items()
        if isinstance(result, Unavailable)
    ]
    for name, ref, cases in pairs(report):
        verdict, detail = _decide(cases)
        verdicts.append(Verdict(name, ref, verdict, detail))
    order = list(report.results)
    return sorted(verdicts, key=lambda v: order.index(v.candidate))


def invariance_failures(c: PriorArtCandidate) -> list[str]:
    """Which checks failed and for which tensors, as short phrases (empty when invariant)."""
    bi = c.batch_invariance
    failures = []
    for n, rows in bi.all_rows.items():
        what = [w for w, k in (("output", rows.fwd_differ), ("row gradients", rows.rowgrad_differ)) if k]
        if what:
            differ = max(rows.fwd_differ, rows.rowgrad_differ)
            failures.append(f"rows alone vs in a batch of {n}: {' and '.join(what)} ({differ:,}/{rows.rows:,} rows)")
    if not bi.params_repeatable:
        failures.append("parameter gradients not repeatable")
    sub = bi.full_vs_sub_batches
    what = [w for w, k in (("output", sub.fwd_differ), ("row gradients", sub.rowgrad_differ)) if k]
    if what:
        failures.append(
            f"sub-batches: {' and '.join(what)} ({max(sub.fwd_differ, sub.rowgrad_differ):,}/{sub.sub_batches:,})"
        )
    sweep = bi.batch_size_sweep
    if sweep.differ:
        failures.append(f"batch-size sweep: {sweep.differ:,}/{sweep.comparisons:,} comparisons")
    return failures


def prior_art_verdicts(report: PriorArtReport) -> list[Verdict]:
    verdicts = []
    for mode, candidates in report.results.items():
        if isinstance(candidates, Unavailable):
            verdicts.append(Verdict(f"mode {mode}", None, "unavailable", candidates.unavailable, mode))
            continue
        for name, c in candidates.items():
            if isinstance(c, Unavailable):
                verdicts.append(Verdict(name, None, "unavailable", c.unavailable, mode))
                continue
            failures = invariance_failures(c)
            if c.batch_invariance.batch_invariant and not failures:
                verdicts.append(Verdict(name, None, "batch-invariant", "every check bitwise equal", mode))
            else:
                detail = "; ".join(failures) or "the report says not invariant"
                verdicts.append(Verdict(name, None, "not invariant", detail, mode))
    return verdicts


def parallel_verdicts(report: ParallelReport) -> list[Verdict]:
    """One verdict per candidate under the report's layout (``reports.parallel.decide``)."""
    out = []
    for name, c in report.results.items():
        if isinstance(c, Unavailable):
            out.append(Verdict(name, None, "unavailable", c.unavailable))
        else:
            verdict, detail = decide(c)
            out.append(
                Verdict(name, None, verdict, f"{report.layout}, {report.ranks} ranks, {report.backend}: {detail}")
            )
    return out


VERDICTS = {BitwiseReport: bitwise_verdicts, PriorArtReport: prior_art_verdicts, ParallelReport: parallel_verdicts}


def verdicts(report: Report) -> list[Verdict]:
    """The verdicts of a bitwise, prior-art or parallel report (a chain replay's decision is its
    ``first_drift`` and ``drop_in`` fields)."""
    r = report.root
    try:
        return VERDICTS[type(r)](r)
    except KeyError:
        raise TypeError(f"{r.kind} reports have no per-candidate verdicts") from None


def any_difference(report: Report) -> bool:
    """True when some comparison with a reference is not bitwise equal (bitwise reports) or some
    candidate is not batch-invariant (prior-art reports); unavailable entries do not count."""
    return any(v.verdict not in ("reusable", "batch-invariant", "unavailable") for v in verdicts(report))
