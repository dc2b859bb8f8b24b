"""Assembling reports in the example reports' schema from what the mode processes reported."""

from __future__ import annotations

from typing import TYPE_CHECKING

from reports.bitwise import compact_kernels
from reports.schema import reference_of

from audit.parent.provenance import collect, repository_state
from audit.parent.parallel import KIND, nccl_environment

if TYPE_CHECKING:
    from audit.parent.runner import Outcome, Plan

RFC = "RL-Align/RL-Kernel#420"


def header(kind: str, op: str, environment: dict) -> dict:
    """The fields every report kind opens with: kind, RFC, op, this checkout's commit and state."""
    commit, dirty = repository_state()
    return {
        "kind": kind,
        "rfc": RFC,
        "op": op,
        "rl_kernel_commit": commit,
        "tracked_tree_dirty": dirty,
        "environment": environment,
    }


def _header(p: Plan, outcome: Outcome) -> dict:
    return header(
        p.task.kind,
        p.op.name,
        collect(
            p.device,
            {m: outcome.environments[m] for m in p.by_mode},
            outcome.tf32,
            {m: outcome.interpreters[m] for m in p.by_mode if m in outcome.interpreters},
            {m: outcome.dispatch[m] for m in p.by_mode if m in outcome.dispatch},
        ),
    )


def bitwise_report(p: Plan, outcome: Outcome) -> dict:
    """The ``h3_bitwise_reuse`` report: candidates in name order, cases in the plan's order, and no
    comparison with a reference that never ran. A mode whose inputs' fingerprints differ from plain
    mode's makes its candidates unavailable (it would compare different problems); a mode that ran
    in another environment says in ``environment.modes`` whether its inputs were plain mode's. With
    ``p.kernels``, each available candidate's fingerprints of the plan's cases, and the table of
    their names (``reports.bitwise.compact_kernels``)."""
    plain = outcome.fingerprints.get("plain", {})
    for mode_name, prints in outcome.fingerprints.items():
        same = all(plain.get(case) == sha for case, sha in prints.items())
        if mode_name in outcome.interpreters:
            outcome.interpreters[mode_name]["inputs_sha256_as_plain"] = same
        if not same:
            for c in p.by_mode[mode_name]:
                outcome.unavailable(c.report_name(mode_name), f"inputs in mode {mode_name} differ from plain mode's")
    missing_refs = {r for r in p.op.references if "unavailable" in outcome.results.get(r, {"unavailable": ""})}
    results = {}
    for name in sorted(outcome.results):
        entry = outcome.results[name]
        if "unavailable" in entry:
            results[name] = {"unavailable": entry["unavailable"]}
            continue
        clean = {"source": entry.get("source", "")}
        for key in sorted(k for k in entry if reference_of(k) not in missing_refs | {None}):
            ref = reference_of(key)
            clean[key] = {str(c): entry[key].get(str(c)) or _lost_reference(outcome, ref, c) for c in p.units}
        results[name] = clean
    kernels = {}
    if p.kernels:
        found = {
            name: {str(c): outcome.kernels[name][str(c)] for c in p.units if str(c) in outcome.kernels[name]}
            for name in results
            if "unavailable" not in results[name] and name in outcome.kernels
        }
        names, compact = compact_kernels(found)
        for name, cases in compact.items():
            results[name]["kernels"] = cases
        kernels = {"kernel_names": names}
    loaded = {"contention": True} if p.contention else {}
    return {
        **_header(p, outcome),
        **loaded,
        "cases": p.units,
        "inputs_sha256": plain,
        **kernels,
        **_timing(p, outcome),
        "results": results,
    }


def reference_failed(ref: str, why: str) -> dict:
    """A comparison with reference ``ref`` in a case that ``ref`` failed, for ``why``."""
    return {"unavailable": f"reference {ref} failed for this case: {why}"}


def _lost_reference(outcome: Outcome, ref: str, case: int) -> dict:
    """The comparison with ``ref`` in a case that has none because ``ref`` has no result there (its
    process died in that case, or while drawing it): unavailable, with ``ref``'s own reason."""
    if (why := outcome.failed.get((ref, str(case)))) is not None:
        return reference_failed(ref, why)
    return {"unavailable": f"reference {ref} has no result for case {case}"}


def _timing(p: Plan, outcome: Outcome) -> dict:
    """``{"timing": {"modes": ...}}`` for the plan's modes that started a process, else nothing."""
    modes = {m: outcome.timing[m] for m in p.by_mode if m in outcome.timing}
    return {"timing": {"modes": modes}} if modes else {}


def prior_art_report(p: Plan, outcome: Outcome) -> dict:
    """The ``h3_prior_art`` report: per mode, per candidate, the checks' results or why not."""
    header = _header(p, outcome)
    env = header["environment"]
    header["environment"] = {
        **{k: v for k, v in env.items() if k != "mode_environment"},
        "megatron_source_commit": p.megatron_commit,
        "mode_environment": env["mode_environment"],
    }
    results: dict[str, dict] = {}
    for mode_name, candidates in p.by_mode.items():
        state = outcome.modes.get(mode_name, {})
        if "unavailable" in state:
            results[mode_name] = {"unavailable": state["unavailable"]}
            continue
        per_mode = {}
        for c in candidates:
            name = c.report_name(mode_name)
            entry = outcome.results.get(name, {"unavailable": "did not run"})
            if "unavailable" not in entry and "accuracy_latency" not in entry:
                entry = {"unavailable": "the checks did not complete"}
            per_mode[name] = entry
        results[mode_name] = per_mode
    loaded = {"contention": True} if p.contention else {}
    return {**header, **loaded, "quick": p.quick, **_timing(p, outcome), "results": results}


def parallel_report(p, results: dict[str, dict], sources: dict[str, str]) -> dict:
    """The ``h3_parallel`` report from ``audit.parent.parallel.run_parallel``'s results: candidates in name
        order, each with its finished cases (native, fixed-order and, where the candidate has one, chunk-order;
    otherwise why not) and, if its run stopped, why."""
    entries: dict[str, dict] = {name: {"unavailable": why} for name, why in p.not_run().items()}
    for name, found in results.items():
        cases = {case: found[case] for case in map(str, p.cases) if case in found}
        if not cases and "unavailable" in found:  # stopped before its first case
            entries[name] = {"unavailable": found["unavailable"]}
            continue
        why_not = {case.pop("no_chunk_order", None) for case in cases.values()} - {None}
        entries[name] = {
            "source": sources[name],
            "reduced": list(p.layout.reduced(p.op)),
            "seconds": found["seconds"],
            "cases": cases,
        } | ({"no_chunk_order": "; ".join(sorted(why_not))} if why_not else {})
        missing = [case for case in map(str, p.cases) if case not in cases]
        if "unavailable" in found:
            entries[name]["failed"] = found["unavailable"]
        elif missing:  # the report says why a case is absent (``reports.parallel``)
            entries[name]["failed"] = f"the run ended without the results of case {', '.join(missing)}"
    return {
        **header(KIND, p.op.name, collect(p.device, {"plain": p.recorded}, False)),
        "layout": p.layout.name,
        "ranks": p.ranks,
        "backend": p.backend,
        "nccl_environment": nccl_environment(p.backend),
        "cases": p.cases,
        "repeats": p.repeats,
        "results": dict(sorted(entries.items())),
    }
