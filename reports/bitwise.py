"""The ``h3_bitwise_reuse`` report: each candidate's outputs and gradients compared bitwise with
each reference, per case; its verdicts, tables and diff.

Verdicts, one per candidate and reference, each pair once (A vs B, not also B vs A), decided over
every case:
- ``reusable``: the output and every gradient bitwise equal in every case, and repeatable (or
  repeatability not checked, which the detail says);
- ``forward only``: the output equal everywhere, and some gradient stably different or no gradient
  compared at all where the report's other pairs compare some (a candidate with no backward);
- ``differs``: the output stably different in some case (the detail names every differing tensor
  and the smallest case where it first differs);
- ``nondeterministic``: some comparison is not repeatable, so its differences are not a stable
  property of the kernel (the detail names those tensors);
- ``unavailable``: the candidate did not run, or some case did not and no difference was found in
  the others (the detail gives the reason).

Kernel fingerprints (optional; absent in the example reports): ``kernel_names`` is the table of
every distinct kernel (CUDA) or operator (CPU) name the report's fingerprints name, and each
candidate's ``kernels`` gives per case the forward and the backward pass as ``[index into
kernel_names, launches]`` pairs (``audit.core.kernels`` says what is recorded), or why no
fingerprint was taken.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from .changes import (
    OpDiff,
    State,
    availability,
    compare_tensors,
    kernel_changes,
    kernel_labels,
    reason,
    state,
    worst,
)
from .schema import (
    CaseComparison,
    CaseKey,
    CaseResult,
    Count,
    Environment,
    FieldError,
    ReportBase,
    Strict,
    Timing,
    Unavailable,
    check_inputs_among,
    json_path,
    listed,
    reference_of,
    without_none,
)
from .tables import (
    CPU_NOTE,
    Cell,
    Section,
    View,
    cmp_cell,
    timing_section,
    unavailable_cell,
    verdict_section,
    visible,
)
from .verdict import Status, Verdict

STATUSES: dict[str, Status] = {
    "reusable": "ok",
    "forward only": "partial",
    "differs": "bad",
    "nondeterministic": "nd",
    "unavailable": "na",
}


KernelUse = Annotated[list[Count], Field(min_length=2, max_length=2)]  # [index into kernel_names, launches]
PHASES = ("forward", "backward")


class KernelPrint(Strict):
    """What one case's forward and backward pass ran: ``[index into kernel_names, launches]`` pairs
    (``backward`` empty when the candidate differentiates nothing)."""

    forward: list[KernelUse]
    backward: list[KernelUse]

    def named(self, names: list[str]) -> dict[str, dict[str, int]]:
        """Phase -> kernel name -> launches."""
        return {phase: {names[i]: n for i, n in getattr(self, phase)} for phase in PHASES}


class BitwiseCandidate(BaseModel):
    """``source`` (what ran, with versions), one ``"vs REF"`` entry per reference: case -> result,
    and optionally ``kernels``: case -> its kernel fingerprint, or why there is none."""

    model_config = ConfigDict(extra="allow", strict=True)
    __pydantic_extra__: dict[str, dict[CaseKey, CaseResult]]

    source: str
    kernels: dict[CaseKey, KernelPrint | Unavailable] | None = None

    @model_serializer(mode="wrap")
    def _drop_absent_kernels(self, handler):
        return without_none(handler(self), "kernels")

    @model_validator(mode="after")
    def _vs_keys(self) -> "BitwiseCandidate":
        for key in self.__pydantic_extra__ or {}:
            if reference_of(key) is None:
                raise ValueError(f"unexpected key {key!r}: comparisons are named 'vs <reference>'")
        return self

    def comparisons(self) -> dict[str, dict[CaseKey, CaseResult]]:
        """Reference name -> case -> result, for every ``"vs REF"`` entry."""
        return {reference_of(k): cases for k, cases in (self.__pydantic_extra__ or {}).items()}


class BitwiseReport(ReportBase):
    kind: Literal["h3_bitwise_reuse"]
    environment: Environment
    contention: bool | None = None  # true: every repeat ran under competing GPU load (--contention)
    cases: list[int]
    inputs_sha256: dict[CaseKey, str] | None = None
    kernel_names: list[str] | None = None
    timing: Timing | None = None
    results: dict[str, BitwiseCandidate | Unavailable]

    @model_serializer(mode="wrap")
    def _drop_absent_fingerprints(self, handler):
        return without_none(handler(self), "contention", "inputs_sha256", "kernel_names", "timing")

    @model_validator(mode="after")
    def _kernel_indices(self) -> "BitwiseReport":
        for name, result in self.results.items():
            for case, found in (getattr(result, "kernels", None) or {}).items():
                if isinstance(found, Unavailable):
                    continue
                if self.kernel_names is None:
                    raise FieldError(("results", name, "kernels"), "kernel fingerprints need kernel_names")
                for phase in PHASES:
                    for i, (index, launches) in enumerate(getattr(found, phase)):
                        if index >= len(self.kernel_names) or launches == 0:
                            raise FieldError(
                                ("results", name, "kernels", case, phase, i),
                                f"[{index}, {launches}]: not an index into kernel_names "
                                f"({len(self.kernel_names)} names) with at least one launch",
                            )
        return self

    @model_validator(mode="after")
    def _cases_agree(self) -> "BitwiseReport":
        cases = [str(c) for c in self.cases]
        known = set(cases)
        check_inputs_among(self.inputs_sha256, cases, "cases")
        for name, result in self.results.items():
            if isinstance(result, Unavailable):
                continue
            for ref, found in result.comparisons().items():
                missing, extra = [c for c in cases if c not in found], [c for c in found if c not in known]
                where = ("results", name, f"vs {ref}")
                if missing:
                    raise FieldError(
                        where,
                        f"lacks case {listed(missing)} of the report's cases {listed(cases)}: a comparison holds "
                        "every case, compared or unavailable",
                    )
                if extra:
                    raise FieldError(where, f"holds case {listed(extra)}, not among the report's cases {listed(cases)}")
        return self

    @model_validator(mode="after")
    def _mirrors_agree(self) -> "BitwiseReport":
        for name, ref, case, tensor, why in _mirror_disagreements(self):
            where = _tensor_loc(tensor) if tensor else ()
            mirror = json_path(("results", ref, f"vs {name}", case, *where))
            raise FieldError(("results", name, f"vs {ref}", case, *where), f"disagrees with its mirror {mirror}: {why}")
        return self


def compact_kernels(found: dict[str, dict[str, dict]]) -> tuple[list[str], dict[str, dict[str, dict]]]:
    """The report's form of fingerprints given as candidate -> case -> ``{phase: {kernel name:
    launches}}`` or ``{"unavailable": why}``: (``kernel_names``, sorted, and candidate -> case ->
    ``{phase: [[index, launches], ...]}`` or the unavailable entry as it is)."""
    names = sorted({k for cases in found.values() for f in cases.values() for p in PHASES for k in f.get(p, {})})
    index = {k: i for i, k in enumerate(names)}
    compact = {
        name: {
            case: f if "unavailable" in f else {p: [[index[k], n] for k, n in f[p].items()] for p in PHASES}
            for case, f in cases.items()
        }
        for name, cases in found.items()
    }
    return names, compact


def kernels_by_case(report: BitwiseReport, name: str) -> dict[str, dict[str, dict[str, int]] | str]:
    """``name``'s fingerprints, case -> phase -> kernel name -> launches, or case -> why there is
    none; empty when the candidate has none."""
    result = report.results.get(name)
    found = getattr(result, "kernels", None) or {}
    return {
        case: f.unavailable if isinstance(f, Unavailable) else f.named(report.kernel_names or [])
        for case, f in found.items()
    }


def _tensor_loc(label: str) -> tuple[str | int, ...]:
    """A ``CaseComparison.by_tensor`` label as the JSON keys under the case: ``out`` -> out[0],
    ``out[1]`` -> out[1], ``dx`` -> grads.x."""
    if label.startswith("out"):
        return ("out", int(label[4:-1]) if "[" in label else 0)
    return ("grads", label[1:])


def _mirror_disagreements(report: BitwiseReport) -> Iterator[tuple[str, str, str, str | None, str]]:
    """(candidate, reference, case, tensor or None, why) for every case and tensor in which A vs B
    and B vs A disagree: one side unavailable, a tensor only one side compares, or a different
    ``equal``, ``differ`` or ``numel``."""
    for name, ref, cases in pairs(report):
        other = report.results.get(ref)
        mirror = None if other is None or isinstance(other, Unavailable) else other.comparisons().get(name)
        if mirror is None:
            continue
        for case in (c for c in cases if c in mirror):
            a, b = cases[case], mirror[case]
            if isinstance(a, Unavailable) or isinstance(b, Unavailable):
                if type(a) is not type(b):
                    yield name, ref, case, None, "one side is unavailable"
                continue
            ta, tb = a.by_tensor(), b.by_tensor()
            if ta.keys() != tb.keys():
                yield name, ref, case, None, f"tensors {sorted(ta)} vs {sorted(tb)}"
                continue
            for tensor, x in ta.items():
                y = tb[tensor]
                if (x.equal, x.differ, x.numel) != (y.equal, y.differ, y.numel):
                    why = f"equal {x.equal}, differ {x.differ}, numel {x.numel} vs {y.equal}, {y.differ}, {y.numel}"
                    yield name, ref, case, tensor, why


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


def candidates(report: BitwiseReport) -> list[str]:
    """Every candidate in the report, available or not."""
    return list(report.results)


def ran(report: BitwiseReport) -> set[str]:
    """The candidates (references included) with a case compared in some comparison."""
    return {
        n for a, b, cases in pairs(report) if any(isinstance(c, CaseComparison) for c in cases.values()) for n in (a, b)
    }


def incomplete(report: BitwiseReport) -> dict[str, str]:
    """Each candidate (a reference too) that ran but lacks a case in some comparison (a pair's
    verdict ``unavailable``), with that pair and the first line of its detail."""
    found: dict[str, str] = {}
    compared = ran(report)
    for v in verdicts(report):
        if v.reference is not None and v.verdict == "unavailable":
            for name in (v.candidate, v.reference):
                if name in compared:
                    found.setdefault(name, f"{v.candidate} vs {v.reference}: {v.detail.splitlines()[0]}")
    return found


def _join(items) -> str:
    return ", ".join(dict.fromkeys(items))


def _decide(cases: dict[str, CaseComparison | Unavailable], backward: bool) -> tuple[str, str]:
    """The pair's verdict and detail over its cases; ``backward``: whether the op has gradients that
    some pair of the report compares, so a pair that compares none lacks a backward."""
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
    gaps = f"; case {listed([c for c, _ in missing])} unavailable: {missing[0][1]}" if missing else ""
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
    equal = f"{_join(order)} bitwise equal in cases {listed([c for c, _ in ran])}"
    if missing:
        return "unavailable", f"{equal}{gaps}"
    equal += " (repeatability not checked)" if unchecked else ", repeatable"
    if backward and not any(cmp.grads for _, cmp in ran):
        return "forward only", f"{equal}; no backward: no gradient to compare"
    return "reusable", equal


def verdicts(report: BitwiseReport) -> list[Verdict]:
    """One verdict per candidate and reference (each pair once); one per unavailable candidate."""
    found = [
        Verdict(name, None, "unavailable", result.unavailable)
        for name, result in report.results.items()
        if isinstance(result, Unavailable)
    ]
    compared = pairs(report)
    backward = any(isinstance(c, CaseComparison) and c.grads for _, _, cases in compared for c in cases.values())
    for name, ref, cases in compared:
        verdict, detail = _decide(cases, backward)
        found.append(Verdict(name, ref, verdict, detail))
    order = list(report.results)
    return sorted(found, key=lambda v: order.index(v.candidate))


def sections(report: BitwiseReport, view: View = View()) -> list[Section]:
    """A head, the verdicts, then per pair a case x tensor table."""
    env = report.environment
    head = Section(
        f"{report.op}: bitwise reuse",
        f"{env.gpu or 'CPU'} · torch {env.torch} · CUDA {env.cuda} · tf32 {env.tf32} · "
        f"rl_kernel {report.rl_kernel_commit[:12]}{' (dirty)' if report.tracked_tree_dirty is True else ''} · "
        f"cases {listed([str(c) for c in report.cases])}"
        + (" · repeats under GPU contention" if report.contention else "")
        + (CPU_NOTE if env.gpu is None else ""),
    )
    out = [head, verdict_section(verdicts(report), STATUSES, view)]
    for name, ref, cases in pairs(report):
        if not view.keeps(name, ref):
            continue
        source = report.results[name].source
        grads = list(dict.fromkeys(g for c in cases.values() if isinstance(c, CaseComparison) for g in c.grads))
        outs = max((len(c.out) for c in cases.values() if isinstance(c, CaseComparison)), default=1)
        out_cols = ["out"] if outs == 1 else [f"out[{i}]" for i in range(outs)]
        section = Section(f"{name} vs {ref}", source, ["case", *out_cols, *(f"d{g}" for g in grads)])
        for case, c in sorted(cases.items(), key=lambda kv: int(kv[0])):
            if isinstance(c, Unavailable):
                row = [Cell(case), unavailable_cell(c.unavailable)]
            else:
                row = [Cell(case), *(cmp_cell(o) for o in c.out), *[Cell("", "plain")] * (outs - len(c.out))]
                row += [cmp_cell(c.grads[g]) if g in c.grads else Cell("—", "na") for g in grads]
            if (shown := visible(row, view)) is not None:
                section.rows.append(shown)
        if section.rows or not view.only_differ:
            out.append(section)
    out += kernel_sections(report, view) if view.kernels else []
    return out + ([timing_section(report.timing)] if view.timing else [])


def kernel_sections(report: BitwiseReport, view: View) -> list[Section]:
    """Per candidate ``view`` keeps, a case x phase table of the kernels that ran, each as
    ``launches× label`` (``kernel_labels`` of the report's kernel names); a note instead when the
    report has no fingerprints."""
    found = {name: kernels_by_case(report, name) for name in report.results if view.keeps(name)}
    if not any(found.values()):
        return [Section("kernels", "this report has no kernel fingerprints")]
    what = "CUDA kernels launched" if report.environment.gpu else "CPU operators recorded by the profiler"
    label = kernel_labels(report.kernel_names or [])
    out = []
    for name, cases in found.items():
        if not cases:
            continue
        section = Section(f"{name}: kernels", what, ["case", *PHASES])
        for case, f in sorted(cases.items(), key=lambda kv: int(kv[0])):
            if isinstance(f, str):
                section.rows.append([Cell(case), unavailable_cell(f)])
            else:
                section.rows.append(
                    [Cell(case), *(Cell("\n".join(f"{n}× {label[k]}" for k, n in f[p].items()) or "—") for p in PHASES)]
                )
        out.append(section)
    return out


def _cases_of(report: BitwiseReport, name: str, ref: str) -> dict[str, CaseComparison | Unavailable] | None:
    """The comparison of ``name`` with ``ref`` in either orientation (None if absent)."""
    for a, b in ((name, ref), (ref, name)):
        result = report.results.get(a)
        if result is not None and not isinstance(result, Unavailable):
            cases = result.comparisons().get(b)
            if cases is not None:
                return cases
    return None


def _state_of(cases: dict[str, CaseComparison | Unavailable]) -> str:
    """Every case of a comparison together: its worst state, or why no case ran."""
    ran = [c for c in cases.values() if isinstance(c, CaseComparison)]
    if not ran and cases:
        return f"unavailable: {next(iter(cases.values())).unavailable}"
    return worst(state(t) for c in ran for t in c.by_tensor().values())


def _state_of_candidate(report: BitwiseReport, name: str) -> State:
    """Every comparison of one candidate (in either orientation) together (``worst``)."""
    return worst(
        state(t)
        for a, b, cases in pairs(report)
        if name in (a, b)
        for c in cases.values()
        if isinstance(c, CaseComparison)
        for t in c.by_tensor().values()
    )


def _state_by_case(report: BitwiseReport) -> dict[str, State]:
    """Every comparison of each case together (``worst``; ``equal`` where none ran), in one pass."""
    found: dict[str, set[State]] = {str(c): set() for c in report.cases}
    for _, _, cases in pairs(report):
        for k, c in cases.items():
            if isinstance(c, CaseComparison):
                found[k].update(state(t) for t in c.by_tensor().values())  # k is a report case (_cases_agree)
    return {k: worst(states) for k, states in found.items()}


def diff(old: BitwiseReport, new: BitwiseReport, found: OpDiff) -> None:
    """Candidates and cases that appeared; what was lost (a candidate, a case, a comparison, a case
    of one comparison, a tensor of one case); per candidate, reference, case and tensor,
    availability and state changes; which side's repeatability is unknown; per candidate that
    runs on both sides, case and pass, a kernel change where both sides have fingerprints."""
    old_cases, new_cases = set(old.cases), set(new.cases)
    found.appeared += [f"candidate {n}" for n in new.results if n not in old.results]
    found.appeared += [f"case {c}" for c in new.cases if c not in old_cases]
    for name, result in old.results.items():
        if name not in new.results:
            why = reason(result)
            found.lose(
                f"candidate {name}", names=[name], old=f"unavailable: {why}" if why else _state_of_candidate(old, name)
            )
    gone = [c for c in old.cases if c not in new_cases]
    by_case = _state_by_case(old) if gone else {}
    for case in gone:
        found.lose(f"case {case}", names=[str(case)], old=by_case[str(case)])
    for name in (n for n in new.results if n in old.results):
        o, n = old.results[name], new.results[name]
        found.changes += availability(reason(o), reason(n), now=_state_of_candidate(new, name), candidate=name)
        found.changes += kernel_changes(kernels_by_case(old, name), kernels_by_case(new, name), candidate=name)
    unknown = {"old": False, "new": False}
    running = [n for n in new.results if not isinstance(new.results[n], Unavailable)]
    for name, ref, before in pairs(old):
        if name not in running or ref not in running:
            continue  # lost, or unavailable now: listed above
        now = _cases_of(new, name, ref)
        if now is None:
            found.lose(f"{name} vs {ref}", names=[name, ref], old=_state_of(before))
            continue
        for case, oc in before.items():
            where = f"{name} vs {ref}, case {case}"
            if case not in now:
                if int(case) in new_cases:
                    found.lose(where, names=[name, ref, case], old=_state_of({case: oc}))
                continue
            nc = now[case]
            found.changes += availability(
                reason(oc), reason(nc), now=_state_of({case: nc}), candidate=name, reference=ref, case=case
            )
            if isinstance(oc, Unavailable) or isinstance(nc, Unavailable):
                continue
            old_t, new_t = oc.by_tensor(), nc.by_tensor()
            unknown["old"] |= any(c.repeatable is None for c in old_t.values())
            unknown["new"] |= any(c.repeatable is None for c in new_t.values())
            compare_tensors(old_t, new_t, found, candidate=name, reference=ref, case=case, where=where)
    found.unknown_repeatability = [side for side, flag in unknown.items() if flag]  # type: ignore[misc]
