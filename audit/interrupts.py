"""SIGTERM handled like Ctrl-C: CI cancels a job with SIGTERM, and the run must then stop its
mode processes and remove its temporary files just as it does for SIGINT."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


class Terminated(BaseException):
    """Raised in the main thread when SIGTERM arrives (a BaseException, like KeyboardInterrupt,
    so that only the handlers meant for it catch it and every ``finally`` still runs)."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated()


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """Within the block SIGTERM raises Terminated; the previous handler is restored after it."""
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
