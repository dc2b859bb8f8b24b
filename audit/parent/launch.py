"""The one way this tool starts a process: mode workers, chain workers, torchrun and its ranks, the
probe of another interpreter, and git.

Contract:
- A launched process runs from this repository, with stdin closed, its output in a log file, in a
  session of its own. It carries a marker variable (``AUDIT_LAUNCH``, never recorded) that every
  descendant inherits, so that ``kill`` finds the whole tree, also the processes that left the
  session (torchrun starts each rank in a new session) or were orphaned.
- ``kill`` (called on a deadline, on an exception such as Ctrl-C or SIGTERM, and after a process
  ended) leaves no process of the tree running. ``job_dir`` directories are removed on every exit.
- A SIGINT or SIGTERM that arrives while a process starts is held until its ``Launched`` exists,
  then handled; when the handler raises (Ctrl-C, ``Terminated``), the tree is killed before the
  exception leaves ``start`` or ``ask``. So no interruption orphans a process that had started.
- How a process ended is worded in one place, ``ended``: "exited with status 1", "was killed by
  SIGKILL", "timed out after 30 s", each with "after raising X" when the worker said so.
- While ``Templates.serving`` is open, or with ``$AUDIT_TEMPLATES`` naming a folder of templates,
  a worker (``python -m audit.worker.X``) whose interpreter, variables and process limits have a
  template is forked from it (``audit.worker.template``: torch and diffusers imported once)
  instead of starting a new interpreter; everything above holds for it too. A template outlives
  the commands that used it, until its owner's ``Templates.close``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from audit.core.packages import bounded

REPO = Path(__file__).resolve().parents[2]
MARKER = "AUDIT_LAUNCH"
LOG_TAIL_LINES = 12
EXIT_GRACE_S = 30.0  # how long a worker that said it finished may take to exit before it is killed
_serial = itertools.count()


def _new_marker() -> str:
    """A value of ``MARKER`` no other process tree of this one carries."""
    return f"{os.getpid()}-{next(_serial)}"


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

    popen: subprocess.Popen | Forked
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
    return _unorphaned(lambda: _start(argv, variables=variables, log=log, python=python, pass_fds=pass_fds))


def _start(argv: list[str], *, variables: dict[str, str], log: Path, python: str, pass_fds: tuple) -> Launched:
    """``start``'s process: forked from a template where one serves it, else spawned."""
    if python and argv[:1] == ["-m"] and argv[1].startswith("audit.worker.") and (templates := _templates()):
        forked = templates.fork(argv[1], argv[2:], variables=variables, python=python, log=log, pass_fds=pass_fds)
        if forked is not None:
            return forked
    return _spawn([python, *argv] if python else list(argv), variables=variables, log=log, pass_fds=pass_fds)


def _unorphaned(begin: Callable[[], Launched]) -> Launched:
    """``begin()``, which starts a process tree, with SIGINT and SIGTERM held while it runs (their
    Python handlers are replaced by a recorder, in the main thread only: no other thread runs
    them). The held signals are raised again once the handlers are back; when a handler raises,
    the started tree is killed first."""
    if threading.current_thread() is not threading.main_thread():
        return begin()
    caught: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    held = {sig: handler for sig, handler in previous.items() if callable(handler)}
    launched = None
    try:
        try:
            for sig in held:
                signal.signal(sig, lambda number, _frame: caught.append(number))
            launched = begin()
        finally:
            for sig, handler in held.items():
                signal.signal(sig, handler)
            for number in dict.fromkeys(caught):
                signal.raise_signal(number)  # its handler runs within this call
    except BaseException:
        if launched is not None:
            launched.kill()
        raise
    return launched


def _spawn(
    command: list[str], *, variables: dict[str, str], log: Path, pass_fds: tuple = (), piped: bool = False
) -> Launched:
    """``command`` as a new process, as ``start`` describes; with ``piped``, its stdout is a pipe
    (``popen.stdout``) and only its stderr goes to ``log``."""
    marker = _new_marker()
    with open(log, "wb") as out:
        popen = subprocess.Popen(
            command,
            env={**variables, MARKER: marker},
            cwd=REPO,
            stdout=subprocess.PIPE if piped else out,
            stderr=out if piped else subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            pass_fds=pass_fds,
            start_new_session=True,
        )
    return Launched(popen, log, marker)


class Forked:
    """A worker forked by a template: the part of ``subprocess.Popen`` that ``Launched`` uses. Its pid
    and then its exit status (from the template, which reaps it) come on ``status``, the request's
    connection."""

    def __init__(self, status: socket.socket, timeout: float):
        self._status, self._buffer, self.returncode = status, b"", None
        pid = self._line(timeout)
        if pid is None:
            status.close()
            raise OSError("the template did not fork the worker")
        self.pid = pid

    def _line(self, timeout: float | None) -> int | None:
        """The next number the template or the worker wrote; None at the end of the stream."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._status], [], [], left)[0]:
                raise subprocess.TimeoutExpired("a forked worker", timeout or 0.0)
            chunk = self._status.recv(64)
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return int(line)

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            code = self._line(timeout)
            self._status.close()
            if code is None:
                raise RuntimeError(f"the template that forked process {self.pid} ended; its exit status is lost")
            self.returncode = code
        return self.returncode

    def poll(self) -> int | None:
        try:
            return self.wait(0)
        except subprocess.TimeoutExpired:
            return None


class Templates:
    """Template processes (``audit.worker.template``), one per interpreter, set of variables (all but
    the ``unkeyed`` ones) and inherited process attributes (``_inherited``), each listening on a
    socket in ``folder`` named after that key. ``fork`` forks a worker from the template of its key.
    The owner (``start_on`` given) starts the template for the ``start_on``-th worker of a key (the
    ones before start as new interpreters: a template that serves one worker only adds its own
    start) and ends them all on ``close``; a template that cannot preload refuses, and the workers
    of its key start as new interpreters. A process started with ``$AUDIT_TEMPLATES=FOLDER`` forks
    its workers from the templates listening there, if any, and starts none.

    ``unkeyed``: the variables, besides ``UNKEYED``, that the owner declares to shape nothing a
    template imports, so that a worker may have other values of them than its template (it has its
    own: the fork replaces the whole environment); written into ``folder`` for the processes that
    use it through $AUDIT_TEMPLATES."""

    def __init__(self, folder: Path | None = None, *, start_on: int | None = 2, unkeyed: tuple[str, ...] = ()):
        self.folder = folder or Path(tempfile.mkdtemp(prefix="audit-templates-"))
        self.start_on = start_on
        declared = self.folder / "unkeyed.json"
        if start_on is not None:
            declared.write_text(json.dumps(sorted(unkeyed)))
        elif declared.exists():
            unkeyed = tuple(json.loads(declared.read_text()))
        self.unkeyed = UNKEYED | frozenset(unkeyed)
        self.asked: dict[str, int] = {}  # workers asked for, per key
        self.started: dict[str, tuple[Launched, socket.socket] | None] = {}  # None: refused

    @contextmanager
    def serving(self) -> Iterator[Templates]:
        """While open, ``start`` forks workers from these templates."""
        _serving.append(self)
        try:
            yield self
        finally:
            _serving.remove(self)

    def fork(
        self, module: str, args: list[str], *, variables: dict[str, str], python: str, log: Path, pass_fds: tuple
    ) -> Launched | None:
        """``python -m MODULE ARGS`` forked from the template for ``python`` and ``variables``; None
        when there is none (not started yet, refused, gone)."""
        keyed = sorted((k, v) for k, v in variables.items() if k not in self.unkeyed)
        name = hashlib.sha256(json.dumps([python, keyed, _inherited()]).encode()).hexdigest()[:24]
        path = self.folder / f"{name}.sock"
        if len(bytes(path)) >= 100:  # longer than a Unix socket's address can be: no template could listen
            return None
        if self.start_on is not None and name not in self.started:
            self.asked[name] = self.asked.get(name, 0) + 1
            if self.asked[name] >= self.start_on:
                self.started[name] = self._start_template(python, variables, path)
        if self.started.get(name, True) is None or not path.exists():
            return None
        marker = _new_marker()
        request = {
            "module": module,
            "args": args,
            "cwd": str(REPO),
            "variables": {**variables, MARKER: marker},
            "targets": [1, 2, *pass_fds],
        }
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            connection.connect(str(path))
            with open(log, "wb") as out:
                socket.send_fds(connection, [json.dumps(request).encode()], [out.fileno(), out.fileno(), *pass_fds])
        except OSError:  # the template is gone
            connection.close()
            return None
        return Launched(Forked(connection, timeout=TEMPLATE_START_S), log, marker)

    def _start_template(
        self, python: str, variables: dict[str, str], path: Path
    ) -> tuple[Launched, socket.socket] | None:
        """The template for ``python`` and ``variables``, listening on ``path``; None when it refused."""
        control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            launched = _spawn(
                [python, "-m", "audit.worker.template", str(theirs.fileno()), str(path)],
                variables=variables,
                log=path.with_suffix(".log"),
                pass_fds=(theirs.fileno(),),
            )
        finally:
            theirs.close()
        if select.select([control], [], [], TEMPLATE_START_S)[0] and control.recv(4096) == b"ready":
            return launched, control
        control.close()
        launched.kill()
        return None

    def close(self) -> None:
        """End every template this owner started, every worker still running from one, and the folder."""
        for template in self.started.values():
            if template is not None:
                template[1].close()
                template[0].kill()
        self.started.clear()
        shutil.rmtree(self.folder, ignore_errors=True)


TEMPLATES_ENV = "AUDIT_TEMPLATES"
# Variables a worker may always have other values of than its template: its own marker and the
# plugins it loads (after the fork).
UNKEYED = frozenset({MARKER, "AUDIT_PLUGINS"})
TEMPLATE_START_S = 600.0  # how long a template may take to import torch and diffusers
_serving: list[Templates] = []


def _inherited() -> list:
    """What a new process inherits from this one, besides its variables and descriptors, that a
    process forked from a template has from the template instead: the resource limits, the CPU
    affinity, the nice value and the umask. A template serves only the processes that have its own."""
    limits = [
        resource.getrlimit(getattr(resource, name)) for name in sorted(dir(resource)) if name.startswith("RLIMIT_")
    ]
    status = Path("/proc/self/status").read_text().splitlines()
    umask = next((line.split()[1] for line in status if line.startswith("Umask:")), None)
    return [limits, sorted(os.sched_getaffinity(0)), os.getpriority(os.PRIO_PROCESS, 0), umask]


def _templates() -> Templates | None:
    """The templates ``start`` forks from: the innermost serving, else those in $AUDIT_TEMPLATES."""
    if _serving:
        return _serving[-1]
    folder = os.environ.get(TEMPLATES_ENV)
    return Templates(Path(folder), start_on=None) if folder else None


def ask(argv: list[str], *, timeout: float, variables: dict[str, str] | None = None) -> tuple[int | None, str, str]:
    """Run a short program to completion (the probe, git): (exit status or None on timeout, its
    stdout, the tail of its stderr). Raises OSError when it cannot be started. The whole tree is
    killed on the timeout or an exception."""
    with job_dir("ask") as folder:
        err = folder / "stderr"
        environment = os.environ if variables is None else variables
        launched = _unorphaned(lambda: _spawn(argv, variables=environment, log=err, piped=True))
        popen = launched.popen
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
