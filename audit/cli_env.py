"""``audit env check``: what each named Python environment holds and what can run there."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from rich.table import Table

from .cli import ConfigOpt, Device, EnvOpt, ModeEnvOpt, _environments, _resolve_device, app, console

env_app = typer.Typer(
    help="Named Python environments (audit.toml, --env): what each holds and what can run there.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(env_app, name="env")


@env_app.command("check")
def env_check(
    device: Annotated[Device, typer.Option(help="Device to judge availability for.")] = Device.auto,
    config: ConfigOpt = None,
    env: EnvOpt = None,
    mode_env: ModeEnvOpt = None,
) -> None:
    """For every configured environment: its interpreter, Python, torch and CUDA, the compared
    libraries it holds, the modes mapped to it, and which modes and candidates can run there, or
    exactly why it cannot run the audit's worker. Exit 1 when some environment cannot."""
    from .environments import check

    envs = _environments(config, env, mode_env)
    if not envs.pythons:
        console.print(
            "no environments configured: every mode runs in this interpreter "
            "(name some in audit.toml or with --env NAME=PYTHON)"
        )
        return
    dev = _resolve_device(device)
    broken = False
    for name, python in envs.pythons.items():
        found = check(python, dev.type)
        mapped = ", ".join(m for m, e in envs.modes.items() if e == name) or "none (select MODE@" + name + ")"
        table = Table(title=escape(f"environment {name}: {python}"), title_justify="left", show_header=False)
        table.add_column("what", no_wrap=True)
        table.add_column("value", overflow="fold")
        table.add_row("modes mapped here", escape(mapped))
        if "problem" in found:
            broken = True
            table.add_row("can run the worker", f"[red]no: {escape(found['problem'])}[/]")
            console.print(table)
            continue
        libraries = ", ".join(f"{k} {v}" for k, v in found["libraries"].items() if v) or "none"
        table.add_row(
            "python / torch / CUDA", escape(f"{found['python_version']} / {found['torch']} / {found['cuda']}")
        )
        table.add_row("libraries", escape(libraries))
        runnable = found["availability"]
        table.add_row(
            "modes that can run", escape(", ".join(m for m, r in runnable["modes"].items() if r is None) or "none")
        )
        for op_name, cands in runnable["candidates"].items():
            table.add_row(
                f"{op_name} candidates", escape(", ".join(c for c, r in cands.items() if r is None) or "none")
            )
        console.print(table)
    if broken:
        raise typer.Exit(1)
