"""The one way this tool starts a process: mode workers, chain workers, torchrun and its ranks, the
probe of another interpreter, and git.

Contract:
- A launched process runs from this repository, with stdin closed, its output in a log file, in a
  session of its own. It carries a marker variable (``AUDIT_LAUNCH``, never recorded) that every
  descendant inherits, so that ``kill`` finds the whole tree, also the processes that left the
  session (torchrun starts each rank in a new session) or were orphaned.
- ``kill`` (called on a deadline, on an exception such as Ctrl-C or SIGTERM, and after a process
  ended) leaves no process of the tree running. ``job_dir`` directories are removed on every exit.
- How a process ended is worded in one place, ``ended``: "exited with status 1", "was killed by
  SIGKILL", "timed out after 30 s", each with "after raising X" when the worker said so.
"""

from __future__ import annotations

import itertools
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from audit.core.packages import bounded

REPO = Path(__file__).resolve().parents[2]
MARKER = "AUDIT_LAUNCH"
LOG_TAIL_LINES = 12
EXIT_GRACE_S = 30.0  # how long a worker that said it finished may take to exit before it is killed
_serial = itertools.count()


@contextmanager
def job_dir(prefix: str) -> Iterator[Path]:
    """A temporary directory for one command's jobs and logs, removed however the block ends."""
    path = Path(tempfile.mkdtemp(prefix=f"audit-{prefix}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@dataclass
class Launched:
    """A running process tree: ``popen`` is its root; ``log`` holds its output."""

    popen: subprocess.Popen
    log: Path
    marker: str
    started: float = field(default_factory=time.monotonic)

    def wait(self, deadline: float) -> int | None:
        """The exit status, or None when the deadline passed first (the tree is then killed)."""
        try:
            return self.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        except BaseException:
            self.kill()
            raise

    def kill(self) -> None:
        """SIGKILL for every process of the tree, the root last reaped; then the stragglers that the
        marker finds (a rank in its own session, an orphan of a killed parent)."""
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for _ in range(5):
            found = _marked(self.marker)
            for pid in found:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            if not found:
                break
            time.sleep(0.05)
        self.popen.wait()

    def tail(self) -> str:
        """The last lines the process printed, bounded (``bounded``)."""
        return log_tail(self.log)


def _marked(marker: str) -> list[int]:
    """Live processes (not zombies) whose environment holds ``MARKER=marker``; none where /proc is absent."""
    needle = f"{MARKER}={marker}".encode() + b"\0"
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if needle in (entry / "environ").read_bytes() + b"\0":
                state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
                if state not in ("Z", "X"):
                    found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def start(
    argv: list[str], *, variables: dict[str, str], log: Path, python: str = sys.executable, pass_fds: tuple = ()
) -> Launched:
    """Start ``python ARGV`` (or ``ARGV`` itself when ``python`` is empty) as described above;
    ``variables`` is its whole environment, to which only the marker is added."""
    marker = f"{os.getpid()}-{next(_serial)}"
    command = [python, *argv] if python else list(argv)
    with open(log, "wb") as out:
        popen = subprocess.Popen(
            command,
            env={**variables, MARKER: marker},
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            pass_fds=pass_fds,
            start_new_session=True,
        )
    return Launched(popen, log, marker)


def ask(argv: list[str], *, timeout: float, variables: dict[str, str] | None = None) -> tuple[int | None, str, str]:
    """Run a short program to completion (the probe, git): (exit status or None on timeout, its
    stdout, the tail of its stderr). Raises OSError when it cannot be started. The whole tree is
    killed on the timeout or an exception."""
    with job_dir("ask") as folder:
        err = folder / "stderr"
        marker = f"{os.getpid()}-{next(_serial)}"
        with open(err, "wb") as err_file:
            popen = subprocess.Popen(
                argv,
                env={**(os.environ if variables is None else variables), MARKER: marker},
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=err_file,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        launched = Launched(popen, err, marker)
        try:
            out, _ = popen.communicate(timeout=timeout)
            code: int | None = popen.returncode
        except subprocess.TimeoutExpired:
            out, code = b"", None
        finally:
            launched.kill()  # a child it left behind goes too
        return code, out.decode(errors="replace"), log_tail(err)


def read_lines(launched: Launched, fd: int, deadline: float) -> Iterator[str | None]:
    """The lines a process writes to the pipe ``fd`` until it closes it; None once when the
    deadline passes (the tree is then killed). An exception while reading kills the tree."""
    buffer = b""
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    launched.kill()
                    yield None
                    return
                ready, _, _ = select.select([pipe], [], [], min(remaining, 1.0))
                if not ready:
                    continue
                chunk = pipe.read(65536)
                if not chunk:
                    return
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                yield from (line.decode() for line in lines if line.strip())
        except BaseException:
            launched.kill()
            raise


def settle(launched: Launched) -> tuple[int, bool]:
    """(exit status, whether it had to be killed) of a process that said it is done: it gets
    ``EXIT_GRACE_S`` to exit on its own, so that its real status is reported, not the kill's.
    Any process it left behind is killed."""
    try:
        code, lingered = launched.popen.wait(timeout=EXIT_GRACE_S), False
    except subprocess.TimeoutExpired:
        code, lingered = None, True
    finally:
        launched.kill()
    return (launched.popen.returncode if code is None else code), lingered


def ended(code: int | None, *, timeout: float | None = None, raised: str | None = None, lingered: bool = False) -> str:
    """How a process ended, in the one wording every report uses: ``timed out after 30 s``,
    ``exited with status 1 after raising KeyError: 'x'``, ``was killed by SIGKILL``, ..."""
    if code is None:
        return f"timed out after {_seconds(timeout)}"
    if lingered:
        return f"said it was done but had not exited {EXIT_GRACE_S:.0f} s later, so it was killed"
    if code < 0:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    else:
        how = f"exited with status {code}"
    return f"{how} after raising {raised}" if raised else how


def _seconds(value: float | None) -> str:
    """``30 s``, ``0.5 s``, ``1e-09 s``: never rounded to a misleading 0."""
    if value is None:
        return "its deadline"
    return f"{value:.0f} s" if value >= 10 else f"{value:.3g} s"


def log_tail(log: Path) -> str:
    """The last lines of a log, bounded (``bounded``)."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 16 * 4096))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    return bounded("\n".join(deque(text.splitlines(), maxlen=LOG_TAIL_LINES)))
