"""What several test modules share: where the repository and the example reports are, the
command line as a real subprocess, and whether a process is still running."""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
SEEDS = sorted(FIXTURES.glob("*.json"))


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def audit(*args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """``audit ARGS`` in a subprocess from the repository, 200 columns wide."""
    return subprocess.run(
        [sys.executable, "-m", "audit", *args],
        cwd=REPO,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")
