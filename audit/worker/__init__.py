"""The worker processes: each runs one job (``main``, ``chain``, ``trajectory``, ``rank``,
``selftest``) and reports what it found."""

import os
import sys
import time
from typing import NoReturn

STARTED = time.time()  # when the interpreter first imported the worker package: the end of ``start``


def leave(code: int) -> NoReturn:
    """End a worker that returned ``code`` with everything sent or written: flush the standard
    streams and exit at once, skipping the interpreter's teardown (about 0.8 s with torch loaded,
    paid by every mode process). A worker that raises ends the normal way, with its traceback."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
