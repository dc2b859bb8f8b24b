"""``audit chain``: the conditioning chain replayed inside diffusers' real MiniMax-H3 block; and the
options and checks it shares with ``audit trajectory``."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from audit.cli import checks
from audit.cli.app import app
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
from audit.cli.sdpa import AttentionOpt, DeterministicOpt, setting
from audit.cli.session import Work, execute, gate_for, junit_path, load_baseline, report_paths
from audit.core.names import CHAIN_OP
from modes import MODES
from reports.chain import ChainReport, settings
from reports.io import MAX_REPORT_MB
from reports.kinds import kind_name

REDUCED = "--hidden 512 --heads 4 --ffn 1024"  # a block that runs in under a minute on two CPU cores
LengthOpt = Annotated[
    Optional[list[int]],
    typer.Option("--length", help="Packed sequence length; repeatable. Default: 257 and 4097 (17 on a CPU device)."),
]
ChainModeOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--mode",
        help="Mode to run under, each in its own process; repeatable; MODE@ENV runs it in environment "
        f"ENV. Default: plain. ({', '.join(MODES)})",
    ),
]
StageCandidateOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--candidate",
        help="STAGE=NAME or all=NAME (NAME may be 'provider' or NAME[MODE]); repeatable. "
        "Default: rl_kernel wherever one exists. gate_residual_msa+norm2_modulate=NAME: one call of "
        "NAME, a gate_residual_norm_modulate candidate, serves both stages (all=NAME never does).",
    ),
]
HiddenOpt = Annotated[
    int,
    typer.Option(help=f"Hidden size (a reduced block for quick runs, e.g. {REDUCED}; the report records it)."),
]
HeadsOpt = Annotated[int, typer.Option(help="Attention heads of 128 channels.")]
FfnOpt = Annotated[int, typer.Option(help="Feed-forward inner size.")]


def chain_job(
    *,
    candidate: Optional[list[str]],
    length: Optional[list[int]],
    hidden: int,
    heads: int,
    ffn: int,
    device,
    attention: Optional[str],
    deterministic: Optional[bool],
    backward: bool,
) -> dict:
    """The job every chain or trajectory worker gets (block, lengths, device, stage choices, SDPA
    setting), each input checked: a problem is a usage error (exit 2) before anything runs."""
    from audit.core.chain import BlockConfig, parse_candidates

    lengths = checks.cases(length, "length")
    config = BlockConfig(hidden=hidden, heads=heads, ffn=ffn)
    if config.problem():
        raise typer.BadParameter(config.problem())
    try:
        choices = parse_candidates(list(candidate or []), MODES)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--candidate") from None
    dev = checks.device(device)
    sdpa, by_default = setting(attention, deterministic, device_type=dev.type, backward=backward)
    return {
        "block": config.__dict__,
        "lengths": lengths or ([17] if dev.type == "cpu" else [257, 4097]),
        "device": str(dev),
        "choices": {key: [choice.name, choice.mode] for key, choice in choices.items()},
        "attention": sdpa.attention,
        "deterministic": sdpa.deterministic,
        "setting_default": by_default,
    }


@app.command()
def chain(
    length: LengthOpt = None,
    mode: ChainModeOpt = None,
    candidate: StageCandidateOpt = None,
    backward: Annotated[
        bool,
        typer.Option(
            "--backward", help="Also back-propagate a fixed gradient from norm_out and compare every stage's gradients."
        ),
    ] = False,
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
    """Replay diffusers' MiniMax-H3 conditioning chain (timestep path, one block, norm_out) stage by
    stage with candidates swapped in: provider, chained, isolated, each twice, and FP64; writes an
    h3_conditioning_chain_replay report with the first stage whose bits drift. Memory on a CPU, full
    block (the defaults), length 17, measured peak resident set: 10.3 GB, 17.5 GB with --backward;
    --hidden 512 --heads 4 --ffn 1024 takes under a minute on two cores (55 s with --backward)."""
    kind = kind_name(ChainReport)
    path = report_paths(out, [CHAIN_OP], kind)[CHAIN_OP]
    junit = junit_path(junit)
    envs = checks.environments(config, env, mode_env)
    loaded = load_baseline(baseline, fail_on, allow_missing=allow_missing, max_size=max_size)
    # the checks above import no torch (tests/test_layout.py); from here on, torch is loaded
    from audit.core.chain import labels
    from audit.parent.chain import chain_report, run_modes

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
        backward=backward,
    )
    job["backward"] = backward
    inherit = checks.inherited(inherit_env)
    asked = labels(job["choices"])
    gate = gate_for(
        loaded,
        fail_on,
        kind=kind,
        names=[CHAIN_OP],
        requested=[c.partition("=")[2] for c in candidate or []],
        allow_missing=allow_missing,
        allow_different_problem=allow_different_problem,
        problem=settings(block=job["block"], backward=backward, lengths=job["lengths"], candidates=asked),
    )

    def compute(advance) -> dict:
        found, recorded = run_modes(job, modes, timeout=timeout, environments=envs, inherit=inherit, advance=advance)
        return chain_report(job, found, recorded)

    execute([Work(CHAIN_OP, len(modes), path, compute)], unit="mode", gate=gate, quiet=quiet, junit=junit)
