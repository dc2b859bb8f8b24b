"""``audit trajectory``: the chain's one-block MiniMax-H3 model as the denoiser of a flow-matching
Euler loop, each candidate chain's latent against the provider's at every step."""

from __future__ import annotations

from typing import Annotated

import typer

from audit.cli import checks
from audit.cli.app import app
from audit.cli.chain import (
    ChainModeOpt,
    FfnOpt,
    HeadsOpt,
    HiddenOpt,
    LengthOpt,
    StageCandidateOpt,
    chain_job,
)
from audit.cli.options import (
    AllowDifferentProblemOpt,
    AllowMissingOpt,
    BaselineOpt,
    ConfigOpt,
    Device,
    DeviceOpt,
    EnvOpt,
    FailOnOpt,
    InheritEnvOpt,
    JunitOpt,
    MaxSizeOpt,
    ModeEnvOpt,
    OutOpt,
    QuietOpt,
    TimeoutOpt,
)
from audit.cli.sdpa import AttentionOpt, DeterministicOpt
from audit.cli.session import Work, execute, gate_for, junit_path, load_baseline, report_paths
from audit.core.names import TRAJECTORY_OP
from reports.io import MAX_REPORT_MB
from reports.kinds import kind_name
from reports.trajectory import TrajectoryReport, settings


@app.command()
def trajectory(
    steps: Annotated[
        int,
        typer.Option(
            "--steps",
            help="Denoising steps (model evaluations). The timesteps are those of diffusers' MiniMaxH3Scheduler "
            "(the MiniMax-H3 pipeline's scheduler) with the pipeline's video shift 12.0.",
        ),
    ] = 8,
    length: LengthOpt = None,
    mode: ChainModeOpt = None,
    candidate: StageCandidateOpt = None,
    attention: AttentionOpt = None,
    deterministic: DeterministicOpt = None,
    device: DeviceOpt = Device.auto,
    out: OutOpt = None,
    hidden: HiddenOpt = 5376,
    heads: HeadsOpt = 56,
    ffn: FfnOpt = 14336,
    timeout: TimeoutOpt = 3600.0,
    inherit_env: InheritEnvOpt = None,
    quiet: QuietOpt = False,
    baseline: BaselineOpt = None,
    fail_on: FailOnOpt = None,
    junit: JunitOpt = None,
    allow_missing: AllowMissingOpt = None,
    max_size: MaxSizeOpt = MAX_REPORT_MB,
    allow_different_problem: AllowDifferentProblemOpt = False,
    config: ConfigOpt = None,
    env: EnvOpt = None,
    mode_env: ModeEnvOpt = None,
) -> None:
    """Run the chain's one-block MiniMax-H3 model as the denoiser of an N-step flow-matching Euler loop,
    once with diffusers' stages and once with the candidate chain, each twice; compare the latents bit
    for bit at every step (plus PSNR and max|Δ| / range) and write an h3_denoising_trajectory report
    naming the first step that differs and whether the difference grows, stays or fades. Memory on a
    CPU, full block (the defaults), length 17, measured peak resident set: 3.3 GB; --hidden 512
    --heads 4 --ffn 1024 takes under a minute on two cores (34 s at 8 steps)."""
    kind = kind_name(TrajectoryReport)
    path = report_paths(out, [TRAJECTORY_OP], kind)[TRAJECTORY_OP]
    junit = junit_path(junit)
    if steps < 1:
        raise checks.usage_error(f"--steps must be at least 1, got {steps}")
    envs = checks.environments(config, env, mode_env)
    loaded = load_baseline(baseline, fail_on, allow_missing=allow_missing, max_size=max_size)
    # the checks above import no torch (tests/test_layout.py); from here on, torch is loaded
    from audit.core.chain import labels
    from audit.core.trajectory import scheduler
    from audit.parent.chain import run_modes
    from audit.parent.trajectory import WORKER, trajectory_report

    checks.load_adapters()
    modes = checks.modes(mode or ["plain"], envs)
    job = chain_job(
        candidate=candidate,
        length=length,
        hidden=hidden,
        heads=heads,
        ffn=ffn,
        device=device,
        attention=attention,
        deterministic=deterministic,
        backward=False,
    )
    job |= {"steps": steps, "timesteps": [float(t) for t in scheduler(steps).timesteps]}
    inherit = checks.inherited(inherit_env)
    asked = labels(job["choices"])
    gate = gate_for(
        loaded,
        fail_on,
        kind=kind,
        names=[TRAJECTORY_OP],
        requested=[c.partition("=")[2] for c in candidate or []],
        allow_missing=allow_missing,
        allow_different_problem=allow_different_problem,
        problem=settings(block=job["block"], steps=steps, lengths=job["lengths"], candidates=asked),
    )

    def compute(advance) -> dict:
        found, recorded = run_modes(
            job, modes, timeout=timeout, environments=envs, inherit=inherit, advance=advance, worker=WORKER
        )
        return trajectory_report(job, found, recorded)

    execute([Work(TRAJECTORY_OP, len(modes), path, compute)], unit="mode", gate=gate, quiet=quiet, junit=junit)
