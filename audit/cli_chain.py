"""``audit chain``: the conditioning chain replayed inside diffusers' real MiniMax-H3 block."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from modes import MODES

from .cli import Device, Timeout, _check_names, _resolve_device, app, console, err


@app.command()
def chain(
    length: Annotated[
        Optional[list[int]],
        typer.Option(
            "--length", help="Packed sequence length; repeatable. Default: 257 and 4097 (17 on a CPU device)."
        ),
    ] = None,
    mode: Annotated[
        Optional[list[str]],
        typer.Option(
            "--mode",
            help=f"Mode to replay under, each in its own process; repeatable. Default: plain. ({', '.join(MODES)})",
        ),
    ] = None,
    candidate: Annotated[
        Optional[list[str]],
        typer.Option(
            "--candidate",
            help="STAGE=NAME or all=NAME (NAME may be 'provider' or NAME[MODE]); repeatable. "
            "Default: rl_kernel wherever one exists.",
        ),
    ] = None,
    backward: Annotated[
        bool,
        typer.Option(
            "--backward", help="Also back-propagate a fixed gradient from norm_out and compare every stage's gradients."
        ),
    ] = False,
    device: Annotated[Device, typer.Option(help="Where the replay runs; auto picks cuda when visible.")] = Device.auto,
    out: Annotated[Path, typer.Option(help="Report file.")] = Path("audit-reports/h3_conditioning_chain_replay.json"),
    hidden: Annotated[
        int, typer.Option(help="Hidden size (a reduced block for quick runs; the report records it).")
    ] = 5376,
    heads: Annotated[int, typer.Option(help="Attention heads of 128 channels.")] = 56,
    ffn: Annotated[int, typer.Option(help="Feed-forward inner size.")] = 14336,
    timeout: Timeout = 3600.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print no tables, only where the report went.")] = False,
) -> None:
    """Replay diffusers' MiniMax-H3 conditioning chain (timestep path, one block, norm_out) stage by
    stage with candidates swapped in: provider, chained, isolated, each twice, and FP64; writes an
    h3_conditioning_chain_replay report with the first stage whose bits drift."""
    from .chain import STAGES, BlockConfig, parse_candidates
    from .chain_worker import chain_report, run_modes
    from reports.io import write_report
    from reports.render import print_report

    modes = list(mode) if mode else ["plain"]
    _check_names("mode", modes, list(MODES))
    if length and any(n < 1 for n in length):
        raise typer.BadParameter("a length is a number of tokens, at least 1", param_hint="--length")
    config = BlockConfig(hidden=hidden, heads=heads, ffn=ffn)
    if config.problem():
        raise typer.BadParameter(config.problem())
    try:
        choices = parse_candidates(list(candidate or []), MODES)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--candidate") from None
    dev = _resolve_device(device)
    lengths = list(length) if length else ([17] if dev.type == "cpu" else [257, 4097])
    job = {
        "block": config.__dict__,
        "lengths": lengths,
        "device": str(dev),
        "backward": backward,
        "choices": {s.name: [choices[s.name].name, choices[s.name].mode] for s in STAGES},
    }
    found = run_modes(job, modes, timeout, lambda line: err.print(escape(line)))
    report = write_report(out, chain_report(job, found))
    if not quiet:
        print_report(report, console)
    console.print(f"wrote {escape(str(out))}")
