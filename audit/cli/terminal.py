"""Where the command line prints: rich consoles for stdout and stderr that never wrap inside a
number or a path when the output goes to a pipe or a CI log."""

from __future__ import annotations

import os
import sys

from rich.console import Console

LOG_WIDTH = 1000  # columns off a terminal when COLUMNS is not set (rich would assume 80)


class _Console(Console):
    """A rich console that leaves a closed pipe to the command line (``audit.cli.app``), which ends
    quietly with status 0, instead of exiting with status 1 itself."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


def console_for(stream) -> Console:
    """A console for ``sys.stdout`` or ``sys.stderr``. On a terminal it takes the terminal's width;
    off one it is COLUMNS wide, or LOG_WIDTH when COLUMNS is unset. The stderr console never wraps
    a printed line (its lines are messages, not tables)."""
    wide = not stream.isatty() and "COLUMNS" not in os.environ
    on_stderr = stream is sys.stderr
    return _Console(stderr=on_stderr, soft_wrap=on_stderr, width=LOG_WIDTH if wide else None)
