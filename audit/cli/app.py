"""The typer application and the two consoles every command prints to."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Optional

import typer
from typer.core import TyperGroup

from audit.cli.terminal import console_for


class _Group(TyperGroup):
    """The commands, with one addition: a reader that closes stdout early (``audit show | head``)
    ends the command quietly with status 0, instead of click's status 1 (which means a finding
    here) and Python's complaint about the unflushed pipe."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(0) from None


app = typer.Typer(
    cls=_Group,
    help="Audit whether library kernels for MiniMax-H3 conditioning operators give bitwise the same "
    "outputs and gradients as the references (diffusers' MiniMax-H3 code and rl_kernel_ops), and "
    "whether they are batch-invariant. Reports are JSON in the schema of the RFC's example reports. "
    "Exit status: 0 done (also when a reader such as head closes the output early), 1 a finding "
    "(--fail-on, an invalid report), 2 unusable input, 3 a report could not be written, 130/143 interrupted.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
console = console_for(sys.stdout)
err = console_for(sys.stderr)


def _version(value: bool) -> None:
    if value:
        from audit.core.packages import version

        typer.echo(f"audit (bitwise-reuse-audit) {version('bitwise-reuse-audit') or 'unknown version'}")
        raise typer.Exit()


@app.callback()
def main(
    _: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = None,
) -> None:
    """Audit whether library kernels give bitwise the same outputs and gradients as the references."""
