"""``audit parallel``: sharded computations against the single-process ones, bitwise."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .cli import (
    Device,
    Timeout,
    _check_names,
    _check_selection,
    _report_paths,
    _resolve_device,
    _usage_error,
    app,
    console,
    err,
)
from .ops import OPS


@app.command()
def parallel(
    op: Annotated[str, typer.Option("--op", help=f"Op to shard: {', '.join(OPS)}.")],
    layout: Annotated[
        str,
        typer.Option(
            "--layout",
            help="tp_column (output features split; GEMM ops), tp_row (the reduction split, partial outputs "
            "summed; GEMM ops) or sp_rows (rows split, table and parameter gradients summed).",
        ),
    ],
    ranks: Annotated[int, typer.Option("--ranks", help="Processes, one shard each (torchrun).")] = 2,
    backend: Annotated[
        Optional[str],
        typer.Option(
            "--backend",
            help="gloo or nccl. Default: nccl on a GPU (one GPU per rank), gloo on a CPU; "
            "gloo lets ranks share one GPU.",
        ),
    ] = None,
    case: Annotated[
        Optional[list[int]],
        typer.Option("--case", help="Rows; repeatable. Default: the op's cases (sp_rows: multiples of --ranks)."),
    ] = None,
    candidate: Annotated[
        Optional[list[str]],
        typer.Option(
            "--candidate",
            help="Candidate to shard; repeatable. Default: every plain-mode candidate that can take the shards.",
        ),
    ] = None,
    device: Annotated[Device, typer.Option(help="Where the ranks run; auto picks cuda when visible.")] = Device.auto,
    out: Annotated[
        Optional[Path],
        typer.Option(help="Report file or directory. Default: audit-reports/h3_parallel.OP.LAYOUT.json."),
    ] = None,
    timeout: Timeout = 3600.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print no tables, only where the report went.")] = False,
) -> None:
    """Shard an op across --ranks processes under torchrun and compare the combined output and
    gradients with the same candidate in one process, bitwise: gathered tensors, and reduced ones
    with the backend's all-reduce and with a fixed-order sum of every rank's partial. Writes an
    h3_parallel report. A rank that fails stops every rank; the report says which and why."""
    from reports.io import write_report
    from reports.render import print_report

    from .assemble import parallel_report
    from .layouts import LAYOUT_NAMES, layout_for
    from .ops import get_op
    from .parallel import plan_parallel, run_parallel

    _check_selection(op, None, candidate)
    if op == "all":
        raise _usage_error("--op: audit parallel takes one op")
    spec = get_op(op)
    _check_names("layout", [layout], list(LAYOUT_NAMES))
    try:
        layout_for(op, layout)
    except KeyError as exc:
        raise _usage_error(exc.args[0]) from None
    if ranks < 2:
        raise _usage_error("--ranks: at least 2 (one rank is the single-process reference itself)")
    dev = _resolve_device(device)
    backend = backend or ("nccl" if dev.type == "cuda" else "gloo")
    if backend not in ("gloo", "nccl") or (backend == "nccl" and dev.type != "cuda"):
        raise _usage_error(
            f"--backend {backend}: use gloo{' or nccl' if dev.type == 'cuda' else ''} on a {dev.type} device"
        )
    if backend == "nccl" and ranks > torch_device_count():
        raise _usage_error(
            f"--ranks {ranks}: NCCL needs one GPU per rank and {torch_device_count()} are visible "
            "(--backend gloo lets ranks share one)"
        )
    plan = plan_parallel(spec, layout, ranks, backend, dev, list(dict.fromkeys(case)) if case else None, candidate)
    named = [n for n in candidate or [] if n in plan.cannot_shard]
    if named:
        raise _usage_error(f"{named[0]}: {plan.cannot_shard[named[0]]}")
    if not plan.candidates:
        why = "; ".join(f"{n}: {r}" for n, r in plan.not_run().items())
        raise _usage_error(f"no candidate can take this layout's shards here ({why})")
    path = _report_paths(out, [f"{op}.{layout}"], "h3_parallel")[f"{op}.{layout}"]
    sources = {c.name: c.source("plain", dev) for c in plan.candidates}
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("candidate"),
        TimeElapsedColumn(),
        console=err,
        transient=False,
    ) as progress:
        task = progress.add_task(f"{op} {layout} × {ranks}", total=len(plan.candidates))
        results = run_parallel(
            plan, timeout, lambda name: progress.update(task, advance=1, description=escape(f"{op}: {name}"))
        )
    report = write_report(path, parallel_report(plan, results, sources))
    if not quiet:
        print_report(report, console)
    console.print(f"wrote {escape(str(path))}")


def torch_device_count() -> int:
    import torch

    return torch.cuda.device_count()
