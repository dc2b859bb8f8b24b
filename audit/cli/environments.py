"""``audit list`` and ``audit env check``: what can run here, and in each named Python environment."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from audit.cli import checks
from audit.cli.app import app, console
from audit.cli.options import ConfigOpt, Device, EnvOpt, ModeEnvOpt, TimeoutOpt

if TYPE_CHECKING:
    import torch

    from audit.parent.interpreters import Environments
    from reports.tables import Cell, Section

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
    """Ops, candidates per op and modes, each with whether it can run here and, if not, why (and
    the extra that installs what is missing); a mode mapped to another Python environment is
    judged in that environment."""
    from reports.render import draw_rich

    envs = checks.environments(config, env, mode_env)
    checks.load_adapters()
    console.print(draw_rich(list_sections(checks.device(device), envs, timeout=timeout)))


def list_sections(dev: torch.device, envs: Environments, *, timeout: float) -> list[Section]:
    """What ``audit list`` prints, as ``reports.tables`` sections: ops (with the cases a run on
    ``dev`` uses), candidates and modes, each with whether it can run and, if not, why."""
    from audit.core.ops import OPS
    from audit.parent.listing import candidate_lines, mode_lines
    from reports.tables import Cell, Section

    ops = Section(f"ops (device: {dev})", columns=["op", "kind", "what", "cases", "references"])
    for spec in OPS.values():
        cases = spec.cpu_cases if dev.type == "cpu" else spec.cases
        texts = (spec.name, spec.kind, spec.summary, " ".join(map(str, cases)), ", ".join(spec.references))
        ops.rows.append([Cell(t) for t in texts])
    cands = Section("candidates (in this interpreter)", columns=["op", "candidate", "modes", "grads", "available here"])
    cands.rows = [
        [Cell(c.op), Cell(c.name), Cell(c.modes), Cell(c.grads), _available(c.unavailable)]
        for c in candidate_lines(dev)
    ]
    modes = Section("modes", columns=["mode", "variables", "what", "runs in", "available there"])
    modes.rows = [
        [
            Cell(m.name),
            Cell("\n".join(f"{k}={v}" for k, v in m.variables.items()) or "—"),
            Cell(m.summary),
            Cell(m.runs_in),
            _available(m.unavailable),
        ]
        for m in mode_lines(dev, envs, timeout=timeout)
    ]
    return [ops, cands, modes]


def _available(reason: str | None) -> Cell:
    """``yes``, or ``no:`` with the reason and the install hint where an extra brings what is missing."""
    from reports.hints import install_hint
    from reports.tables import Cell

    if reason is None:
        return Cell("yes", "ok")
    hint = install_hint(reason)
    return Cell(f"no: {reason}" + (f" · install: {hint}" if hint else ""), "na")
