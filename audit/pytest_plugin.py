"""The pytest plugin (entry point ``pytest11``): "is my kernel still bitwise the reference?" as an
assertion in a kernel author's own test suite.

The fixture ``bitwise_audit`` gives ``assert_reusable(candidate, *, op, ...)``. It computes the
candidate and the reference in this process, as one mode worker of ``audit run`` would in plain
mode (the same inputs, seeds, repeats and comparator), assembles a real ``h3_bitwise_reuse``
report and fails the test unless the pair's verdict is ``reusable``, with the verdict line as the
message. With ``baseline=`` (a committed report or a directory of them) it also fails on any
regression against it. A candidate registered with ``@candidate`` in the test module itself is
found without ``$AUDIT_PLUGINS``. Nothing heavy is imported until the fixture is used.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import pytest


class BitwiseAudit:
    """What the ``bitwise_audit`` fixture returns."""

    def assert_reusable(
        self,
        candidate: str,
        *,
        op: str,
        reference: str = "rl_kernel",
        cases: Sequence[int] = (1, 257),
        repeats: int = 2,
        device: str = "cpu",
        baseline: str | Path | None = None,
    ):
        """Fail unless ``candidate`` is bitwise equal to ``reference`` for ``op`` in every case,
        output and every gradient both provide, repeatably; return the report (a validated
        ``reports.kinds.Report``). Names are report names: ``diffusers[plain]`` for the GEMM ops'
        diffusers reference. A side that cannot run here skips the test, with the reason."""
        from audit.core.names import is_count
        from reports.kinds import kind_of

        bad = [c for c in cases if not is_count(c)]
        if bad:
            pytest.fail(
                f"bitwise_audit: cases {bad}: a case is a count of rows, an int from 1 to 2**63 - 1", pytrace=False
            )
        if repeats < 1:
            pytest.fail(f"bitwise_audit: repeats={repeats}: each side computes at least once", pytrace=False)
        cases = list(dict.fromkeys(cases))
        report = _report(candidate, op=op, reference=reference, cases=cases, repeats=repeats, device=device)
        pair = {candidate, reference}
        found = [v for v in kind_of(report).verdicts(report.root) if {v.candidate, v.reference} == pair]
        if not found or found[0].verdict != "reusable":
            what = f"{found[0].verdict} — {found[0].detail}" if found else "no verdict"
            pytest.fail(f"{candidate} vs {reference} ({op}): {what}", pytrace=False)
        if baseline is not None:
            _no_regression(report, Path(baseline))
        return report


def _report(candidate: str, *, op: str, reference: str, cases: list[int], repeats: int, device: str):
    import torch

    from audit.core.candidates import from_report_name, load_adapters, unavailable_reason
    from audit.core.inputs import draw_grad_out, draw_inputs, fingerprint
    from audit.core.ops import get_op
    from audit.parent.assemble import header
    from audit.parent.provenance import collect
    from audit.parent.variables import worker_variables
    from audit.worker.bitwise import compare_results, evaluate_repeated
    from modes import get_mode
    from reports.kinds import Report

    load_adapters()
    try:
        spec = get_op(op)
    except KeyError as exc:
        pytest.fail(f"bitwise_audit: {exc.args[0]}", pytrace=False)
    dev, sides = torch.device(device), {}
    for name in (candidate, reference):
        try:
            sides[name], mode = from_report_name(op, name)
        except ValueError as exc:
            pytest.fail(f"bitwise_audit: {exc}", pytrace=False)
        if mode != "plain":
            pytest.fail(
                f"bitwise_audit: {name} runs in mode {mode}, and the fixture computes in the test's own process in "
                f"plain mode only; `audit run --op {op} --mode {mode}` runs that mode in its own process",
                pytrace=False,
            )
    for name, c in sides.items():
        if (why := unavailable_reason(c, dev)) is not None:
            pytest.skip(f"{name} cannot run here: {why}")
    results = {name: {"source": c.source("plain", dev)} for name, c in sides.items()}
    prints = {}
    for case in cases:
        drawn = draw_inputs(spec, case, seed=case)
        prints[str(case)] = fingerprint(drawn)
        inputs = {k: v.to(dev) for k, v in drawn.items()}
        grad_out = draw_grad_out(spec, case, seed=case).to(dev)
        got = {name: evaluate_repeated(c, spec, inputs, grad_out, repeats) for name, c in sides.items()}
        for name, other in ((candidate, reference), (reference, candidate)):
            (mine, mine_reps), (theirs, theirs_reps) = got[name], got[other]
            results[name].setdefault(f"vs {other}", {})[str(case)] = compare_results(
                spec, mine, theirs, mine_reps, theirs_reps
            )
    environment = collect(dev, {"plain": worker_variables(os.environ, get_mode("plain"))[1]}, tf32=False)
    data = {**header("h3_bitwise_reuse", op, environment), "cases": cases, "inputs_sha256": prints, "results": results}
    return Report.model_validate(data)


def _no_regression(report, baseline: Path) -> None:
    from reports.diff import diff_sets
    from reports.io import load_set
    from reports.kinds import kind_of

    old = load_set(baseline)
    key = kind_of(report).key(report.root)
    if key not in old:
        pytest.fail(f"{baseline} holds no {key[0]} report for {key[1]}", pytrace=False)
    diff = diff_sets(  # the test's few cases are not the baseline's coverage: only regressions count
        {key: old[key]},
        {key: (Path("this test"), report)},
        old_name=str(baseline),
        new_name="this test",
        allow_missing=["all"],
    )
    if diff.regressed:
        pytest.fail(f"against {baseline}: {diff.summary()}; first: {diff.first_failure()}", pytrace=False)


@pytest.fixture
def bitwise_audit() -> BitwiseAudit:
    """Assert that a candidate is bitwise-reusable: ``bitwise_audit.assert_reusable(name, op=...)``."""
    return BitwiseAudit()
