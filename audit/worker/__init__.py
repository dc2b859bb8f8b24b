"""The worker processes: each runs one job (``main``, ``chain``, ``trajectory``, ``rank``,
``selftest``) and reports what it found."""

import os
import sys
import time
from typing import NoReturn

from audit.core.events import Emit, Waiting
from audit.core.timing import phase

STARTED = time.time()  # when the interpreter first imported the worker package: the end of ``start``
_turn = {"fd": -1}  # the read end of this worker's turn pipe, until its turn came (``hold_turn``)


def hold_turn(fd: int) -> None:
    """This worker computes only after the runner writes a byte on ``fd`` (``await_turn``)."""
    _turn["fd"] = fd


def await_turn(emit: Emit) -> bool:
    """Send ``Waiting`` and block, in the ``waiting`` phase, until the runner gives this worker its
    turn on the device. True on the call that received the turn; False on later calls, or without a
    turn pipe. Raises RuntimeError when the runner closed the pipe without giving the turn (it is
    gone)."""
    fd, _turn["fd"] = _turn["fd"], -1
    if fd < 0:
        return False
    emit(Waiting())
    with phase("waiting"):
        got = os.read(fd, 1)
    os.close(fd)
    if not got:
        raise RuntimeError("the runner closed this worker's turn pipe before its turn")
    return True


def leave(code: int) -> NoReturn:
    """End a worker that returned ``code`` with everything sent or written: flush the standard
    streams and exit at once, skipping the interpreter's teardown (about 0.8 s with torch loaded,
    paid by every mode process). A worker that raises ends the normal way, with its traceback."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
