"""Every worker process starts through one launcher (``audit.parent.launch``), so ``run``,
``prior-art``, ``chain``, ``trajectory`` and ``parallel`` stop, clean up, record variables and word an ending the
same way. Each test runs the real command with real worker processes: as a process of its own where
it is sent a real signal, else in this process (``audit_in_process``)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from audit.parent import launch
from tests.helpers import REPO, SESSION_TEMPLATES, alive, audit_in_process

PLUGIN = {"AUDIT_PLUGINS": "tests.plugins.lifecycle"}
COMMANDS = {
    "run": "run --op gate_residual --case 2 --candidate {c}",
    "prior-art": "prior-art --op gate_residual --quick --candidate {c}",
    "chain": "chain --hidden 256 --heads 2 --ffn 512 --length 17 --candidate gate_residual_msa={c}",
    "parallel": "parallel --op gate_residual --layout sp_rows --case 2 --candidate {c}",
    "trajectory": "trajectory --hidden 256 --heads 2 --ffn 512 --length 17 --steps 2 --candidate gate_residual_msa={c}",
}


def command_line(
    command: str, candidate: str, folder: Path, extra: tuple, env: dict | None, line: str | None = None
) -> tuple[list[str], dict]:
    """The arguments of ``audit COMMAND`` (``line`` instead of the command's usual line) on the CPU,
    writing to ``folder``/out, and the variables it adds: the lifecycle plugin, TMPDIR and
    $LIFECYCLE_DIR in ``folder``, then ``env``."""
    (folder / "tmp").mkdir(exist_ok=True)
    argv = [*(line or COMMANDS[command]).format(c=candidate).split(), "--device", "cpu", *extra]
    variables = {**PLUGIN, "TMPDIR": str(folder / "tmp"), "LIFECYCLE_DIR": str(folder), **(env or {})}
    return [*argv, "--out", str(folder / "out"), "-q"], variables


def start(
    command: str, candidate: str, folder: Path, *extra: str, env: dict | None = None, line: str | None = None
) -> subprocess.Popen:
    """``command_line`` as a process of its own, for tests that send it a signal; 200 columns wide,
    as ``audit_in_process`` runs its commands."""
    argv, variables = command_line(command, candidate, folder, extra, env, line)
    return subprocess.Popen(
        [sys.executable, "-m", "audit", *argv],
        cwd=REPO,
        env={**os.environ, "COLUMNS": "200", **variables},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # Ctrl-C as a terminal delivers it
    )


def run_here(command: str, candidate: str, folder: Path, *extra: str, env: dict | None = None):
    """``command_line`` run to its end with this process as the command's own
    (``audit_in_process``), for tests that send it no signal."""
    argv, variables = command_line(command, candidate, folder, extra, env)
    return audit_in_process(*argv, env=variables)


def hanging_pids(proc: subprocess.Popen, folder: Path, count: int = 1, deadline_s: float = 120) -> list[int]:
    """The pids the hanging candidates wrote (each worker's and its helper's), once ``count`` wrote."""
    deadline = time.monotonic() + deadline_s
    while len(found := sorted(folder.glob("pids-*"))) < count:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "no worker reached the hanging candidate"
        time.sleep(0.2)
    time.sleep(0.3)
    return [int(p) for f in found for p in f.read_text().split()]


def leftovers(folder: Path) -> list[int]:
    """Running processes of this test's command, whether or not they told us their pid: those that
    carry its $LIFECYCLE_DIR (every process the command started as a new interpreter inherits it),
    and the workers forked from the session's templates (whose /proc environment is the template's;
    the tests of this process run one at a time, so they are this test's). Not the templates: they
    are the session's, even one that this test's command started (with its variables)."""
    needle = f"LIFECYCLE_DIR={folder}".encode() + b"\0"
    templates = {t[0].popen.pid for s in SESSION_TEMPLATES for t in s.started.values() if t is not None}
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            ours = parent in templates or needle in (entry / "environ").read_bytes() + b"\0"
            if ours and int(entry.name) not in templates and alive(int(entry.name)):
                found.append(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def assert_cleaned(folder: Path, pids: list[int]) -> None:
    deadline = time.monotonic() + 10
    while (any(map(alive, pids)) or leftovers(folder)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if alive(p)] and not leftovers(folder), "a process of the run outlived it"
    left = list((folder / "tmp").glob("audit-*")) + list((folder / "tmp").glob("torchelastic_*"))
    assert not left, f"left behind: {left}"


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize(
    "sig, status, word", [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")]
)
def test_a_signal_stops_every_process_and_removes_every_temporary_directory(tmp_path, command, sig, status, word):
    proc = start(command, "leaves_a_child", tmp_path)
    pids = hanging_pids(proc, tmp_path, count=2 if command == "parallel" else 1)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == status, stderr
    assert f"{word}: worker processes stopped" in stderr and "reports already written: none" in stderr
    assert not (tmp_path / "out").exists()
    assert_cleaned(tmp_path, pids)


def test_a_signal_also_stops_the_workers_waiting_for_their_turn(tmp_path):
    """Every op: norm_modulate runs and is written, gate_residual's worker hangs, and the next ops'
    workers, started ahead, wait for their turn; SIGTERM stops them all."""
    line = "run --op all --case 2 --candidate {c} --candidate rl_kernel --ahead 2"
    proc = start("run", "leaves_a_child", tmp_path, line=line)
    pids = hanging_pids(proc, tmp_path)
    deadline = time.monotonic() + 60
    while len(waiting := [p for p in leftovers(tmp_path) if p not in pids and p != proc.pid]) < 2:
        assert time.monotonic() < deadline, f"no worker started ahead: {leftovers(tmp_path)}"
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert "h3_bitwise_reuse.norm_modulate.json" in stderr.split("reports already written:")[1]
    assert_cleaned(tmp_path, pids + waiting)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_deadline_kills_the_whole_tree_and_is_worded_one_way(tmp_path, command):
    """The deadline may come before or after the worker reaches the hanging candidate (a loaded
    machine starts slowly): either way the report says so in one wording, and nothing is left."""
    done = run_here(command, "leaves_a_child", tmp_path, "--timeout", "2")
    assert done.returncode == 0, done.stderr
    report = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    assert "timed out after 2 s" in json.dumps(report["results"])
    pids = [int(p) for f in tmp_path.glob("pids-*") for p in f.read_text().split()]
    assert_cleaned(tmp_path, pids)


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("out", ["/proc/r.json", "{tmp}/file/r.json"])
def test_an_unwritable_out_is_one_line_and_status_2_before_any_work(tmp_path, command, out):
    """``run`` as a real process (its real exit status); the other commands decide the same before
    any worker starts, so they run in this process (``audit_in_process``), where a worker that ran
    would still be a process of its own that writes its seen-* file."""
    (tmp_path / "file").write_text("")
    started = time.monotonic()
    argv = [*COMMANDS[command].format(c="sees").split(), "--device", "cpu", "--out", out.format(tmp=tmp_path)]
    if command == "run":
        done = subprocess.run(
            [sys.executable, "-m", "audit", *argv],
            cwd=REPO,
            env={**os.environ, **PLUGIN, "LIFECYCLE_DIR": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=60,
        )
    else:
        done = audit_in_process(*argv, env={**PLUGIN, "LIFECYCLE_DIR": str(tmp_path)})
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().count("\n") == 0 and "--out" in done.stderr
    assert not list(tmp_path.glob("seen-*")), "a worker ran"
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_shell_numerics_variable_is_stripped_or_inherited_and_what_a_worker_sees_is_recorded(tmp_path, command):
    """Two numerics variables in the shell, one inherited (--inherit-env) and one not, and a
    process-shaping one, which stays."""
    shell = {
        "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
        "CUBLASLT_WORKSPACE_SIZE": "7",
        "PYTHONHASHSEED": "7",
        "TRITON_F32_DEFAULT": "ieee",
    }
    done = run_here(command, "sees", tmp_path, "--inherit-env", "CUBLAS_WORKSPACE_CONFIG", env=shell)
    assert done.returncode == 0, done.stderr
    seen = [json.loads(f.read_text()) for f in tmp_path.glob("seen-*.json")]
    assert seen, "the candidate never ran"
    recorded = json.loads(next((tmp_path / "out").glob("*.json")).read_text())["environment"]["mode_environment"]
    for variables in seen:
        assert variables.get("PYTHONHASHSEED") == "7" and variables.get("CUBLAS_WORKSPACE_CONFIG") == ":4096:8"
        assert "TRITON_F32_DEFAULT" not in variables and "CUBLASLT_WORKSPACE_SIZE" not in variables
        assert any(variables == {k: v for k, v in r.items() if k != "MASTER_PORT"} for r in recorded.values()) or (
            command == "parallel" and _rank_sees_what_is_recorded(variables, recorded["plain"])
        ), (variables, recorded)


def _rank_sees_what_is_recorded(seen: dict, recorded: dict) -> bool:
    """torchrun adds its own variables to a rank's (rank, world size, ...); every variable recorded
    for the ranks is what a rank sees."""
    return all(seen.get(k) == v for k, v in recorded.items())


def test_ended_words_each_way_a_process_ends_once():
    assert launch.ended(None, timeout=4) == "timed out after 4 s"
    assert launch.ended(None, timeout=1e-9) == "timed out after 1e-09 s"
    assert launch.ended(-9) == "was killed by SIGKILL"
    assert launch.ended(3, raised="KeyError: 'x'") == "exited with status 3 after raising KeyError: 'x'"
    assert launch.ended(0, lingered=True).endswith("so it was killed")


def test_ask_kills_what_a_timed_out_program_left_behind(tmp_path):
    script = tmp_path / "wrapper.sh"
    script.write_text(f"#!/bin/sh\nsleep 600 &\necho $! > {tmp_path}/child\nwait\n")
    script.chmod(0o755)
    code, _, _ = launch.ask([str(script)], timeout=2)
    assert code is None
    assert not alive(int((tmp_path / "child").read_text()))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("how", ["start", "ask"])
def test_a_signal_the_moment_a_process_exists_kills_it_before_the_exception_leaves(monkeypatch, tmp_path, how, sig):
    """The signal comes after the child exists and before the launcher returns it (Ctrl-C just after
    a worker started), so the caller, which never holds the child, cannot kill it: the launcher
    must. Ctrl-C raises KeyboardInterrupt here as in an interactive command, also where pytest runs
    as a background job, which starts with SIGINT ignored."""
    from audit.cli.session import Terminated, sigterm_raises

    children = []
    real = subprocess.Popen

    def popen_then_signal(*args, **kwargs):
        child = real(*args, **kwargs)
        children.append(child.pid)
        os.kill(os.getpid(), sig)
        return child

    monkeypatch.setattr(subprocess, "Popen", popen_then_signal)
    interrupt = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with sigterm_raises(), pytest.raises(KeyboardInterrupt if sig == signal.SIGINT else Terminated):
            if how == "start":
                launch.start(["sleep", "600"], python="", variables=dict(os.environ), log=tmp_path / "log")
            else:
                launch.ask(["sleep", "600"], timeout=30)
        assert len(children) == 1 and not alive(children[0])
    finally:
        signal.signal(signal.SIGINT, interrupt)
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
