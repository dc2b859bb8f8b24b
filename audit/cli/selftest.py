"""``audit selftest``: the comparator and the checks prove, on the CPU, that they can fail."""

from __future__ import annotations

import json
import os
import time

import typer
from rich.markup import escape

from audit.cli.app import app, console, err
from audit.cli.options import QuietOpt, TimeoutOpt
from audit.cli.session import Terminated, sigterm_raises


@app.command()
def selftest(timeout: TimeoutOpt = 600.0, quiet: QuietOpt = False) -> None:
    """Run a small real audit on the CPU (diffusers and rl_kernel, gate_residual in bf16 and
    timestep_mlp in fp32), then check that the comparator reports every planted difference:
    one flipped bit (sign, exponent, last mantissa) in each output and gradient, at that index
    and with the right ULP distance; -0.0 against +0.0; two NaN payloads; and that a candidate 3
    ULPs off, one whose rows depend on the batch and one that is not repeatable are caught.
    Prints one line per property (-q: only those missed) and a total; exit 1 when any is missed."""
    from audit.parent import launch
    from audit.parent.variables import worker_variables
    from modes import get_mode

    variables, _ = worker_variables(os.environ, get_mode("plain"))
    with launch.job_dir("selftest") as folder:
        worker = None
        try:
            with sigterm_raises():  # before the worker starts, so that no signal finds it unguarded
                worker = launch.start(
                    ["-m", "audit.worker.selftest", str(folder / "result.json")],
                    variables=variables,
                    log=folder / "log",
                )
                code = worker.wait(time.monotonic() + timeout)
        except (KeyboardInterrupt, Terminated) as exc:
            if worker is not None:
                worker.kill()
            terminated = isinstance(exc, Terminated)
            err.print(f"[red]{'terminated' if terminated else 'interrupted'}: the selftest's worker stopped[/]")
            raise typer.Exit(143 if terminated else 130)
        worker.kill()
        if code != 0 or not (folder / "result.json").exists():
            err.print(
                f"[red]selftest: the worker {escape(launch.ended(code, timeout=timeout))}:\n{escape(worker.tail())}[/]"
            )
            raise typer.Exit(1)
        found = json.loads((folder / "result.json").read_text())
    for p in found if not quiet else [p for p in found if not p["holds"]]:
        mark = "[green]holds [/]" if p["holds"] else "[red]MISSED[/]"
        console.print(f"{mark} {escape(p['property'])}" + ("" if p["holds"] else f": {escape(p['detail'])}"))
    missed = sum(not p["holds"] for p in found)
    console.print(
        f"selftest: {len(found) - missed} of {len(found)} properties hold" + (f", {missed} missed" if missed else "")
    )
    if missed:
        raise typer.Exit(1)
