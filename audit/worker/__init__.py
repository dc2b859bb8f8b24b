"""The worker processes: each runs one job (``main``, ``chain``, ``rank``) and reports events."""

import time

STARTED = time.time()  # when the interpreter first imported the worker package: the end of ``start``
