"""Checks of the command line's input, each done before anything runs: a failure is one line on
stderr and exit status 2 (``usage_error``), or typer's own usage message for a bad value."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.markup import escape

from audit.cli.app import err
from audit.cli.options import Device
from audit.core.names import OP_NAMES, is_count
from modes import MODES, Slot, get_mode

if TYPE_CHECKING:
    import torch


def usage_error(message: str) -> typer.Exit:
    """Print ``message`` as one line on stderr; the returned Exit (status 2) is for ``raise``."""
    err.print(f"[red]error: {escape(message)}[/]")
    return typer.Exit(2)


def check_names(kind: str, given: list[str], valid: list[str]) -> None:
    unknown = [g for g in given if g not in valid]
    if unknown:
        raise typer.BadParameter(f"unknown {kind} {', '.join(map(repr, unknown))}; valid: {', '.join(valid)}")


def inherited(names: Optional[list[str]]) -> tuple[str, ...]:
    """The variables named with --inherit-env, once each; one not set in this shell is a usage error."""
    missing = [n for n in names or [] if n not in os.environ]
    if missing:
        raise usage_error(f"--inherit-env: {', '.join(missing)} not set in this shell")
    return tuple(dict.fromkeys(names or []))


def environments(config: Optional[Path], env: Optional[list[str]], mode_env: Optional[list[str]]):
    """The named environments; a bad config or --env/--mode-env value is a usage error (exit 2)."""
    from audit.parent.interpreters import ConfigError, load

    try:
        return load(config, envs=env or [], mode_envs=mode_env or [], known_modes=list(MODES))
    except ConfigError as exc:
        raise usage_error(str(exc)) from None


def load_adapters() -> None:
    """Register every candidate; a bad $AUDIT_PLUGINS module is a usage error naming it."""
    from audit.core.candidates import PluginError, load_adapters

    try:
        load_adapters()
    except PluginError as exc:
        raise usage_error(str(exc)) from None


def modes(mode: Optional[list[str]], envs) -> list[str]:
    """The mode slots selected (``MODE`` or ``MODE@ENV`` with ENV named), default every mode."""
    try:
        slots = [Slot.parse(m) for m in mode or []]
    except KeyError as exc:
        raise usage_error(f"--mode: {exc.args[0]}") from None
    check_names("mode", [s.mode for s in slots], list(MODES))
    named = envs.pythons if envs is not None else {}
    for s in slots:
        if s.environment is not None and s.environment not in named:
            raise usage_error(
                f"--mode {s}: environment {s.environment!r} is not named (--env {s.environment}=PYTHON or "
                f"audit.toml); named: {', '.join(named) or 'none'}"
            )
    return list(dict.fromkeys(mode)) if mode else list(MODES)


def op_names(op: str) -> list[str]:
    """The ops ``--op`` names (``all``: every op); an unknown one is a usage error (status 2).
    Imports no torch."""
    ops = list(OP_NAMES) if op == "all" else [op]
    check_names("op", ops, list(OP_NAMES))
    return ops


def selection(op: str, mode: Optional[list[str]], candidate: Optional[list[str]], envs=None) -> list[str]:
    """The ops selected; unknown op, mode or candidate names are a usage error (status 2)."""
    from audit.core.candidates import candidates_for
    from audit.core.ops import get_op

    ops = op_names(op)
    load_adapters()
    selected = modes(mode, envs)
    slots = [*MODES, *(m for m in selected if "@" in m)]
    known = {c.name for o in ops for c in candidates_for(o)}
    known |= {c.report_name(s) for o in ops for c in candidates_for(o) for s in slots if c.runs_in(s)}
    check_names("candidate", candidate or [], sorted(known))
    idle = [m for m in mode or [] if not any(get_mode(m).runs(get_op(o)) for o in ops)]
    if idle:
        runs = [o for o in OP_NAMES if get_mode(idle[0]).runs(get_op(o))]
        raise usage_error(
            f"--mode {idle[0]} runs none of the selected ops ({', '.join(ops)}); it runs {', '.join(runs)}"
            " (row ops run in plain mode only)"
        )

    def runs_in(name: str, slots: list[str]) -> list[str]:
        return [
            s
            for s in slots
            if any(
                c.runs_in(s) and get_mode(s).runs(get_op(o)) and name in (c.name, c.report_name(s))
                for o in ops
                for c in candidates_for(o)
            )
        ]

    for name in candidate or []:
        if not runs_in(name, selected):
            raise usage_error(
                f"--candidate {name} runs in none of the selected modes ({', '.join(selected)}) for "
                f"{', '.join(ops)}; it runs in {', '.join(runs_in(name, slots))}"
            )
    return ops


def modes_for(spec, mode: Optional[list[str]], envs=None) -> list[str]:
    """The selected mode slots ``spec`` runs in (``Mode.runs``)."""
    return [m for m in modes(mode, envs) if get_mode(m).runs(spec)]


def device(choice: Device):
    """The torch device for ``--device``; cuda where none is visible is a usage error."""
    import torch

    if choice is Device.auto:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice is Device.cuda and not torch.cuda.is_available():
        raise typer.BadParameter("--device cuda: no CUDA device is visible to torch", param_hint="--device")
    return torch.device(choice.value)


def cases(given: Optional[list[int]], what: str = "case") -> list[int] | None:
    """``--case``/``--length`` values once each, or None; each must be at least 1 and fit int64."""
    if not given:
        return None
    bad = [c for c in given if not is_count(c)]
    if bad:
        raise usage_error(f"--{what} {bad[0]}: a {what} is a count of rows or tokens, from 1 to 2**63 - 1")
    return list(dict.fromkeys(given))


def contention_device(contention: bool, device: torch.device) -> None:
    """--contention on a device that is not CUDA is a usage error (``audit.core.contention``)."""
    if contention and device.type != "cuda":
        raise usage_error(f"--contention needs a CUDA device (it loads a side CUDA stream); this run is on {device}")
