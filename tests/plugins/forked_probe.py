"""A process body for the worker templates' tests, run as ``python -m tests.plugins.forked_probe
OUT ACTION``: writes to OUT what its process is (argv, directory, environment, the temporary
directory tempfile finds, open descriptors, whether it leads its own session, the line it reads on
descriptor 0), then does ACTION: ``return``, ``exit-N`` (``sys.exit(N)``), ``raise`` (an uncaught
ValueError) or ``hang``."""

import json
import os
import sys
import tempfile
import time
from pathlib import Path


def main(out: str, action: str) -> None:
    seen = {
        "argv": sys.argv,
        "cwd": os.getcwd(),
        "environ": dict(os.environ),
        "tempdir": tempfile.gettempdir(),
        "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
        "session_leader": os.getsid(0) == os.getpid(),
        "stdin": sys.stdin.read(),
    }
    Path(out).write_text(json.dumps(seen))
    print(f"probe {action}", flush=True)
    if action.startswith("exit-"):
        sys.exit(int(action.removeprefix("exit-")))
    if action == "raise":
        raise ValueError("planted by forked_probe")
    if action == "hang":
        time.sleep(600)


if __name__ == "__main__":
    main(*sys.argv[1:])
