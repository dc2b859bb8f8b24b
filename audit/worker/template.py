"""The template: a process that imports what the workers import, once, then forks a worker for each
request of the launcher (``audit.parent.launch.Templates``), so that the workers of one interpreter
and one set of variables pay torch's and diffusers' imports once.

Started as ``python -m audit.worker.template FD PATH`` with the variables of the workers it will
serve; FD is its end of a ``SOCK_SEQPACKET`` pair with its owner. It imports ``PRELOAD`` (and
diffusers' modules in ``DIFFUSERS``, where diffusers is installed), listens on the Unix socket PATH
and sends ``ready``; or, when an import fails or has initialised CUDA, prints the traceback to its
log, sends ``refused: WHY`` and ends. It imports no candidate, plugin or adapter and runs no
operator, so it holds no state a worker computes with: torch's generators are at their seeds, CUDA
is not initialised, OpenMP has started no thread (the one thread besides the main one is the
OpenBLAS server numpy starts, which OpenBLAS stops before a fork, in its ``pthread_atfork``
handler).

A request is a connection to PATH and one message on it: JSON ``{"module", "args", "cwd",
"variables", "targets"}`` and file descriptors ``fds``. The forked worker:

- starts a session of its own, then writes its pid and a newline on the connection;
- has ``fds[i]`` as descriptor ``targets[i]`` (the log as 1 and 2, the pipes the launcher passes),
  /dev/null as 0, and no other descriptor;
- runs in ``cwd`` with exactly ``variables`` as its environment, and runs ``python -m MODULE ARGS``
  as a fresh interpreter would: the same ``sys.argv``, the same exit status (0, the status of
  ``SystemExit``, 1 after printing an exception's traceback), the same exit functions.

When it ends, the template writes its exit status (``subprocess.Popen.returncode``'s convention:
negative for a signal) and a newline on the connection. The template ends, removing PATH, when its
owner closes its end of the pair; the workers it forked are their launchers' to stop
(``Launched.kill``).
"""

from __future__ import annotations

import atexit
import fcntl
import importlib
import json
import os
import runpy
import select
import signal
import socket
import sys
import tempfile
import time
import traceback

PRELOAD = (
    "torch",
    "audit.worker.main",
    "audit.worker.bitwise",
    "audit.worker.prior_art",
    "audit.worker.chain",
    "audit.worker.trajectory",
    "audit.worker.selftest",
)
DIFFUSERS = (
    "diffusers.models.transformers.transformer_minimax_h3",
    "diffusers.models.embeddings",
    "diffusers.schedulers",
)
MAX_MESSAGE = 1 << 20
MAX_FDS = 16


def main(fd: int, path: str) -> int:
    control = socket.socket(fileno=fd)
    try:
        for name in PRELOAD:
            importlib.import_module(name)
        for name in DIFFUSERS:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name != "diffusers":
                    raise
        if sys.modules["torch"].cuda.is_initialized():
            raise RuntimeError("importing the workers' modules initialised CUDA, which a fork cannot keep")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(path)
        listener.listen(64)
    except BaseException as exc:
        traceback.print_exc()
        control.send(f"refused: {type(exc).__name__}: {exc}".encode())
        return 0
    control.send(b"ready")
    try:
        serve(control, listener)
    finally:
        os.unlink(path)
    return 0


def serve(control: socket.socket, listener: socket.socket) -> None:
    """Fork a worker per request until the owner closes ``control``; report each one's exit status on
    its request's connection when it is reaped."""
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}
    while True:
        ready, _, _ = select.select([control, listener, wake_read], [], [])
        if wake_read in ready:
            os.read(wake_read, 4096)
        _reap(children)
        if control in ready and not control.recv(16):
            return
        if listener in ready:
            connection, _ = listener.accept()
            message, fds, _, _ = socket.recv_fds(connection, MAX_MESSAGE, MAX_FDS)
            if not message:
                connection.close()
                continue
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _become(json.loads(message), connection.fileno(), fds)
            children[pid] = connection
            for fd in fds:
                os.close(fd)


def _reap(children: dict[int, socket.socket]) -> None:
    for pid in list(children):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            sock = children.pop(pid)
            try:
                sock.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
            except OSError:
                pass  # the launcher is gone
            sock.close()


def _become(request: dict, status: int, fds: list[int]) -> None:
    """In the forked child: become the requested worker, as described above; never returns."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    targets = request["targets"]
    os.write(status, f"{os.getpid()}\n".encode())
    high = max([*targets, *fds, 2]) + 1
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, high) for fd in fds]
    for fd, target in zip(moved, targets):
        os.dup2(fd, target)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    keep = {0, 1, 2, *targets}
    for fd in map(int, os.listdir("/proc/self/fd")):
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass  # the directory's own descriptor, closed already
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["variables"])
    tempfile.tempdir = None  # found again from $TMPDIR, as a fresh interpreter would
    import audit.worker

    audit.worker.STARTED = time.time()
    sys.argv = ["-m", *request["args"]]
    code = 0
    try:
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = _exit_status(exc.code)
    except KeyboardInterrupt:
        code = -signal.SIGINT
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    if code == -signal.SIGINT:  # as CPython ends on an unhandled KeyboardInterrupt: by the signal
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code)


def _exit_status(code: object) -> int:
    """The exit status CPython gives ``SystemExit(code)``: None is 0, an int itself, anything else is
    printed to stderr and gives 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]), sys.argv[2]))
