"""``audit parallel``: sharded computations against the single-process ones, bitwise."""

from __future__ import annotations

import os
from typing import Annotated, Optional

import typer

from audit.cli import checks
from audit.cli.app import app, err
from audit.cli.options import (
    AllowMissingOpt,
    BaselineOpt,
    CaseOpt,
    Device,
    DeviceOpt,
    FailOnOpt,
    InheritEnvOpt,
    JunitOpt,
    MaxSizeOpt,
    OutOpt,
    QuietOpt,
    TimeoutOpt,
)
from audit.cli.session import Work, execute, gate_for, junit_path, load_baseline, report_paths
from audit.core.names import LAYOUT_NAMES, OP_NAMES, UNEVEN_RULE
from reports.io import MAX_REPORT_MB
from reports.kinds import kind_name
from reports.parallel import ParallelReport


GLOO_SHARED_RANKS = 8  # gloo ranks allowed beyond the cores: they take turns on them


def rank_limit(backend: str) -> tuple[int, str]:
    """(the most ranks ``backend`` may start here, what bounds it): NCCL needs one GPU per rank;
    gloo ranks share the CPU cores, one per core or up to ``GLOO_SHARED_RANKS`` taking turns."""
    if backend == "nccl":
        import torch

        return (
            torch.cuda.device_count(),
            "NCCL needs one GPU per rank and {n} are visible (--backend gloo lets ranks share one)",
        )
    cores = os.cpu_count() or 1
    return (
        max(cores, GLOO_SHARED_RANKS),
        f"gloo ranks share the CPU: one per core ({cores} here), or up to {GLOO_SHARED_RANKS} taking turns",
    )


@app.command()
def parallel(
    op: Annotated[str, typer.Option("--op", help=f"Op to shard: {', '.join(OP_NAMES)}.")],
    layout: Annotated[
        str,
        typer.Option(
            "--layout",
            help="tp_column (output features split; GEMM ops), tp_row (the reduction split, partial outputs "
            f"summed; GEMM ops) or sp_rows (rows split, table and parameter gradients summed); {UNEVEN_RULE}.",
        ),
    ],
    ranks: Annotated[
        int,
        typer.Option(
            "--ranks",
            help="Processes, one shard each (torchrun); with gloo 2 to the CPU count or 8, whichever is more "
            "(ranks beyond the cores take turns on them); with nccl 2 to the GPU count.",
        ),
    ] = 2,
    backend: Annotated[
        Optional[str],
        typer.Option(
            "--backend",
            help="gloo or nccl. Default: nccl on a GPU (one GPU per rank), gloo on a CPU; "
            "gloo lets ranks share one GPU.",
        ),
    ] = None,
    case: CaseOpt = None,
    candidate: Annotated[
        Optional[list[str]],
        typer.Option(
            "--candidate",
            help="Candidate to shard; repeatable. Default: every plain-mode candidate that can take the shards.",
        ),
    ] = None,
    device: DeviceOpt = Device.auto,
    repeats: Annotated[
        int,
        typer.Option(
            min=1,
            max=100,
            help="Times each side (the sharded step, every reduction included, and the single process) computes "
            "each case (1-100); a comparison whose runs differ on either side is marked not repeatable "
            "(nondeterministic). 1 turns the check off.",
        ),
    ] = 2,
    out: OutOpt = None,
    timeout: TimeoutOpt = 3600.0,
    inherit_env: InheritEnvOpt = None,
    quiet: QuietOpt = False,
    baseline: BaselineOpt = None,
    fail_on: FailOnOpt = None,
    junit: JunitOpt = None,
    allow_missing: AllowMissingOpt = None,
    max_size: MaxSizeOpt = MAX_REPORT_MB,
) -> None:
    """Shard an op across --ranks processes under torchrun and compare the combined output and
    gradients with the same candidate in one process, bitwise: gathered tensors, and reduced ones
    with the backend's all-reduce, with a fixed-order sum of every rank's partial and, for a
    candidate that declares one, in its chunk order; each side runs --repeats times. Writes an
    h3_parallel report. A rank that fails stops every rank; the report says which and why."""
    checks.op_names(op)
    if op == "all":
        raise checks.usage_error("--op: audit parallel takes one op")
    checks.check_names("layout", [layout], list(LAYOUT_NAMES))
    chosen = checks.cases(case)
    name, kind = f"{op}.{layout}", kind_name(ParallelReport)
    path = report_paths(out, [name], kind)[name]
    junit = junit_path(junit)
    inherit = checks.inherited(inherit_env)
    loaded = load_baseline(baseline, fail_on, allow_missing=allow_missing, max_size=max_size)
    # the checks above import no torch (tests/test_layout.py); from here on, torch is loaded
    checks.selection(op, None, candidate)
    from audit.core.layouts import layout_for

    try:
        layout_for(op, layout)
    except KeyError as exc:
        raise checks.usage_error(exc.args[0]) from None
    gate = gate_for(
        loaded,
        fail_on,
        kind=kind,
        names=[f"{op} {layout}"],
        requested=candidate,
        allow_missing=allow_missing,
    )
    plan = _plan(
        op,
        layout,
        ranks=ranks,
        backend=backend,
        device=checks.device(device),
        cases=chosen,
        candidate=candidate,
        repeats=repeats,
        inherit=inherit,
    )
    sources = {c.name: c.source("plain", plan.device) for c in plan.candidates}

    def compute(advance) -> dict:
        from audit.parent.assemble import parallel_report
        from audit.parent.parallel import run_parallel

        return parallel_report(plan, run_parallel(plan, timeout=timeout, advance=advance), sources)

    execute(
        [Work(f"{op} {layout} × {ranks}", len(plan.candidates), path, compute)],
        unit="candidate",
        gate=gate,
        quiet=quiet,
        junit=junit,
    )


def _plan(op: str, layout: str, *, ranks: int, backend, device, cases, candidate, repeats: int, inherit):
    """The checked plan: ranks within ``rank_limit``, a backend that fits the device, cases that the
    ranks can split (``layouts.split_problem``) and at least one candidate that can take the shards;
    otherwise a usage error before anything starts."""
    from audit.core.layouts import layout_for, split_problem
    from audit.core.ops import get_op
    from audit.parent.parallel import default_cases, plan_parallel

    backend = backend or ("nccl" if device.type == "cuda" else "gloo")
    if backend not in ("gloo", "nccl") or (backend == "nccl" and device.type != "cuda"):
        raise checks.usage_error(
            f"--backend {backend}: use gloo{' or nccl' if device.type == 'cuda' else ''} on a {device.type} device"
        )
    if ranks < 2:
        raise checks.usage_error("--ranks: at least 2 (one rank is the single-process reference itself)")
    limit, why = rank_limit(backend)
    if ranks > limit:
        raise checks.usage_error(f"--ranks {ranks}: {why.format(n=limit)}")
    spec, shards = get_op(op), layout_for(op, layout)
    cases = cases or default_cases(spec, shards, ranks, device)
    for rows in cases:
        if why := split_problem(spec, shards, rows, ranks):
            raise checks.usage_error(f"--ranks {ranks}, case {rows}: {why}")
    cores = os.cpu_count() or 1
    if backend == "gloo" and ranks > cores:
        err.print(
            f"[yellow]--ranks {ranks}: more gloo ranks than the {cores} CPU cores; they take turns (slower, and "
            "the report's seconds count the waiting)[/]"
        )
    plan = plan_parallel(
        spec,
        layout,
        ranks=ranks,
        backend=backend,
        device=device,
        cases=cases,
        names=candidate,
        repeats=repeats,
        inherit=inherit,
    )
    named = [n for n in candidate or [] if n in plan.cannot_shard]
    if named:
        raise checks.usage_error(f"{named[0]}: {plan.cannot_shard[named[0]]}")
    if not plan.candidates:
        why = "; ".join(f"{n}: {r}" for n, r in plan.not_run().items())
        raise checks.usage_error(f"no candidate can take this layout's shards here ({why})")
    return plan
