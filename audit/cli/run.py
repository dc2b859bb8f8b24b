"""``audit run`` and ``audit prior-art``: every mode of each op in its own worker process."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Optional

import typer

from audit.cli import checks
from audit.cli.app import app, err
from audit.cli.options import (
    AllowMissingOpt,
    BaselineOpt,
    CandidateOpt,
    CaseOpt,
    ConfigOpt,
    ContentionOpt,
    Device,
    DeviceOpt,
    EnvOpt,
    FailOn,
    FailOnOpt,
    InheritEnvOpt,
    JunitOpt,
    MaxSizeOpt,
    ModeEnvOpt,
    ModeOpt,
    OpOpt,
    OutOpt,
    QuietOpt,
    TimeoutOpt,
)
from reports.io import MAX_REPORT_MB
from audit.cli.session import Work, execute, gate_for, junit_path, load_baseline, report_paths
from reports.bitwise import BitwiseReport
from reports.kinds import kind_name
from reports.prior_art import PriorArtReport


def _works(plans, paths: dict[str, Path], timeout: float, ahead: int):
    """One ``Work`` per plan that has something to run (a plan without is named on stderr), and the
    ``Runner`` that runs them, starting up to ``ahead`` mode workers before their turn."""
    from audit.parent.runner import Runner

    for p in [p for p in plans if not p.by_mode]:
        err.print(
            f"[yellow]{p.op.name}: none of the selected modes and candidates runs for this op "
            f"(row ops run in plain mode only); no report[/]"
        )
    plans = [p for p in plans if p.by_mode]
    if not plans:
        raise typer.BadParameter("nothing to run for the selected op, modes and candidates")
    runner = Runner(plans, timeout=timeout, ahead=ahead)
    works = [
        Work(p.op.name, p.total, paths[p.op.name], lambda advance, i=i, p=p: p.task.assemble(p, runner.run(i, advance)))
        for i, p in enumerate(plans)
    ]
    return works, runner


@app.command()
def run(
    op: OpOpt = "all",
    case: CaseOpt = None,
    mode: ModeOpt = None,
    candidate: CandidateOpt = None,
    device: DeviceOpt = Device.auto,
    out: OutOpt = None,
    timeout: TimeoutOpt = 3600.0,
    inherit_env: InheritEnvOpt = None,
    quiet: QuietOpt = False,
    repeats: Annotated[
        int,
        typer.Option(
            min=1,
            max=100,
            help="Times every candidate, references included, computes each case (1-100); a tensor whose "
            "runs differ is marked not repeatable (nondeterministic). 1 turns the check off.",
        ),
    ] = 2,
    kernels: Annotated[
        bool,
        typer.Option(
            "--kernels/--no-kernels",
            help="Take kernel fingerprints: every candidate evaluates each case once more under torch.profiler, "
            "apart from the compared evaluations, and the report records the CUDA kernels (on a CPU, the "
            "operators) of its forward and backward pass (audit show --kernels). The compared bits do not "
            "depend on it. Where the profiler is missing or fails, the report says so and the run goes on.",
        ),
    ] = True,
    contention: ContentionOpt = False,
    ahead: Annotated[
        Optional[int],
        typer.Option(
            min=0,
            max=8,
            show_default=False,
            help="Mode processes started before their turn (0-8), of this op or the next: they import, switch "
            "their mode on and draw their first inputs while an earlier mode computes, then wait. Modes still "
            "compute one at a time, in order, so the bits do not depend on it; each waiting process holds its "
            "libraries and first inputs in memory. 0 starts each process at its turn. [default: half the CPU "
            "cores, at most 8]",
        ),
    ] = None,
    baseline: BaselineOpt = None,
    fail_on: FailOnOpt = None,
    junit: JunitOpt = None,
    allow_missing: AllowMissingOpt = None,
    max_size: MaxSizeOpt = MAX_REPORT_MB,
    config: ConfigOpt = None,
    env: EnvOpt = None,
    mode_env: ModeEnvOpt = None,
) -> None:
    """Run the bitwise-reuse audit: every mode in its own subprocess (in its own Python environment
    where audit.toml or --mode-env says so), every candidate and case computed --repeats times and
    compared bitwise with both references; writes one h3_bitwise_reuse report per op and prints the
    verdicts, then the detail tables. Exit 0, or 1 when --fail-on says so (a regression against
    --baseline, or any difference)."""
    if not kernels and fail_on is FailOn.kernel_change:
        raise checks.usage_error("--fail-on kernel-change needs this run's kernel fingerprints: drop --no-kernels")
    if contention and repeats < 2:
        raise checks.usage_error("--contention loads the repeats: it needs --repeats 2 or more")
    chosen = checks.cases(case)
    paths = report_paths(out, checks.op_names(op), kind_name(BitwiseReport))
    junit = junit_path(junit)
    inherit = checks.inherited(inherit_env)
    envs = checks.environments(config, env, mode_env)
    loaded = load_baseline(baseline, fail_on, allow_missing=allow_missing, max_size=max_size)
    # the checks above import no torch (tests/test_layout.py); from here on, torch is loaded
    from audit.core.ops import get_op
    from audit.parent.runner import plan
    from audit.parent.tasks import BITWISE

    ops = checks.selection(op, mode, candidate, envs)
    dev = checks.device(device)
    checks.contention_device(contention, dev)
    plans = []
    for name in ops:
        spec = get_op(name)
        units = chosen or list(spec.cpu_cases if dev.type == "cpu" else spec.cases)
        plans.append(
            plan(
                spec,
                BITWISE,
                modes=checks.modes_for(spec, mode, envs),
                names=candidate,
                units=units,
                device=dev,
                inherit_env=inherit,
                environments=envs,
                repeats=repeats,
                kernels=kernels,
                contention=contention,
            )
        )
    works, runner = _works(plans, paths, timeout, min(8, (os.cpu_count() or 2) // 2) if ahead is None else ahead)
    gate = gate_for(
        loaded,
        fail_on,
        kind=BITWISE.kind,
        names=[w.label for w in works],
        requested=candidate,
        allow_missing=allow_missing,
    )
    if dev.type == "cpu" and not case:
        err.print("[dim]CPU device: using each op's CPU cases (pass --case to choose).[/]")
    execute(works, unit="candidate × case", gate=gate, quiet=quiet, junit=junit, workers=runner)


@app.command("prior-art")
def prior_art(
    op: OpOpt = "all",
    mode: ModeOpt = None,
    candidate: CandidateOpt = None,
    quick: Annotated[
        bool, typer.Option("--quick", help="Small sizes for smoke tests; the report says quick: true.")
    ] = False,
    device: DeviceOpt = Device.auto,
    out: OutOpt = None,
    megatron_src: Annotated[
        Optional[Path],
        typer.Option(
            "--megatron-src",
            help="A Megatron-LM source tree to use instead of the installed megatron-core; "
            "its commit goes into the report.",
        ),
    ] = None,
    timeout: TimeoutOpt = 3600.0,
    inherit_env: InheritEnvOpt = None,
    quiet: QuietOpt = False,
    contention: ContentionOpt = False,
    baseline: BaselineOpt = None,
    fail_on: FailOnOpt = None,
    junit: JunitOpt = None,
    allow_missing: AllowMissingOpt = None,
    max_size: MaxSizeOpt = MAX_REPORT_MB,
    config: ConfigOpt = None,
    env: EnvOpt = None,
    mode_env: ModeEnvOpt = None,
) -> None:
    """Write the h3_prior_art report: for each mode and candidate, bitwise batch invariance (every
    row alone vs in batches, contiguous sub-batches, a batch-size sweep with probe rows, parameter
    gradients repeated), accuracy against FP64 and latency; each mode in its own process and, where
    configured, its own Python environment."""
    paths = report_paths(out, checks.op_names(op), kind_name(PriorArtReport))
    junit = junit_path(junit)
    inherit = checks.inherited(inherit_env)
    envs = checks.environments(config, env, mode_env)
    loaded = load_baseline(baseline, fail_on, allow_missing=allow_missing, max_size=max_size)
    # the checks above import no torch (tests/test_layout.py); from here on, torch is loaded
    from audit.core.ops import get_op
    from audit.core.prior_art_sizes import CHECKS, sizes_for, sizes_json
    from audit.parent.runner import plan
    from audit.parent.tasks import PRIOR_ART

    ops = checks.selection(op, mode, candidate, envs)
    commit = _use_megatron_src(megatron_src)
    dev = checks.device(device)
    checks.contention_device(contention, dev)
    plans = [
        plan(
            spec,
            PRIOR_ART,
            modes=checks.modes_for(spec, mode, envs),
            names=candidate,
            units=list(CHECKS),
            device=dev,
            inherit_env=inherit,
            environments=envs,
            sizes=sizes_json(sizes_for(spec, quick)),
            quick=quick,
            megatron_commit=commit,
            contention=contention,
        )
        for spec in map(get_op, ops)
    ]
    works, runner = _works(plans, paths, timeout, ahead=0)  # latency is measured: nothing computes beside it
    gate = gate_for(
        loaded,
        fail_on,
        kind=PRIOR_ART.kind,
        names=[w.label for w in works],
        quick=quick,
        requested=candidate,
        allow_missing=allow_missing,
    )
    execute(works, unit="candidate × check", gate=gate, quiet=quiet, junit=junit, workers=runner)


def _use_megatron_src(path: Optional[Path]) -> Optional[str]:
    """Point the mode processes at a Megatron-LM source tree; returns its short commit."""
    if path is None:
        return None
    if not (path / "megatron" / "core").is_dir():
        raise checks.usage_error(f"--megatron-src: {path} has no megatron/core: not a Megatron-LM source tree")
    os.environ["AUDIT_MEGATRON_SRC"] = str(path.resolve())
    from audit.parent.provenance import short_commit

    return short_commit(path)
