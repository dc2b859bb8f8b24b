"""``audit list`` and ``audit env check``: what can run here, and in each named Python environment."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from audit.cli import checks
from audit.cli.app import app, console
from audit.cli.options import ConfigOpt, Device, EnvOpt, ModeEnvOpt, TimeoutOpt

PROBE_TIMEOUT_S = 360.0  # an environment's probe, which imports every adapter there

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
    timeout: TimeoutOpt = PROBE_TIMEOUT_S,
) -> None:
    """For every configured environment: its interpreter, Python, torch and CUDA, the compared
    libraries it holds, the modes mapped to it, and which modes and candidates can run there, or
    exactly why it cannot run the audit's worker. Exit 1 when some environment cannot."""
    from audit.parent.interpreters import check

    envs = checks.environments(config, env, mode_env)
    if not envs.pythons:
        console.print(
            "no environments configured: every mode runs in this interpreter "
            "(name some in audit.toml or with --env NAME=PYTHON)"
        )
        return
    dev = checks.device(device)
    broken = False
    for name, python in envs.pythons.items():
        found = check(python, dev.type, timeout=timeout)
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


@app.command("list")
def list_(
    device: Annotated[Device, typer.Option(help="Device to judge availability for.")] = Device.auto,
    config: ConfigOpt = None,
    env: EnvOpt = None,
    mode_env: ModeEnvOpt = None,
    timeout: TimeoutOpt = PROBE_TIMEOUT_S,
) -> None:
    """Ops, candidates per op and modes, each with whether it can run here and, if not, why; a mode
    mapped to another Python environment is judged in that environment."""
    from audit.core.ops import OPS
    from audit.parent.listing import candidate_lines, mode_lines

    envs = checks.environments(config, env, mode_env)
    checks.load_adapters()
    dev = checks.device(device)
    ops = Table(title=f"ops (device: {dev})", title_justify="left")
    for col in ("op", "kind", "what", "cases", "references"):
        ops.add_column(col)
    for spec in OPS.values():
        cases = spec.cpu_cases if dev.type == "cpu" else spec.cases
        ops.add_row(spec.name, spec.kind, escape(spec.summary), " ".join(map(str, cases)), ", ".join(spec.references))
    console.print(ops)
    cands = Table(title="candidates (in this interpreter)", title_justify="left")
    for col in ("op", "candidate", "modes", "grads", "available here"):
        cands.add_column(col, overflow="fold", no_wrap=col in ("op", "candidate"))
    for c in candidate_lines(dev):
        cands.add_row(c.op, c.name, c.modes, c.grads, _available(c.unavailable))
    console.print(cands)
    modes = Table(title="modes", title_justify="left")
    lines = mode_lines(dev, envs, timeout=timeout)
    widest = max(len(f"{k}={v}") for m in lines for k, v in m.variables.items())
    for col in ("mode", "variables", "what", "runs in", "available there"):
        modes.add_column(col, overflow="fold", no_wrap=col == "mode", min_width=widest if col == "variables" else None)
    for m in lines:
        variables = "\n".join(f"{k}={v}" for k, v in m.variables.items()) or "—"
        modes.add_row(m.name, variables, m.summary, escape(m.runs_in), _available(m.unavailable))
    console.print(modes)


def _available(reason: str | None) -> str:
    return "[green]yes[/]" if reason is None else f"[grey50]no: {escape(reason)}[/]"
