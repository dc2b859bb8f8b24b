"""Fault injection, end to end on the CPU: D1-D9 of issue 10, each against the real command line,
real worker processes, a real memory limit and real signals. Run it alone with
``python -m pytest tests/cli/test_fault_injection.py``.

D1 out of memory or killed while inputs are drawn; D2 the real exit status; D3 output paths;
D4 SIGTERM; D5 --timeout; D6 the shell's numerics variables; D7 bounded reasons; D8 a bad
$AUDIT_PLUGINS; D9 repeated cases.
"""

import json
import os
import resource
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from audit.cli import app
from audit.parent import launch
from modes import get_mode
from audit.parent.variables import is_numerics_variable, worker_variables

from tests.helpers import REPO, audit_in_process

FAULTY = {"AUDIT_PLUGINS": "tests.plugins.faulty"}
RUN = ("run", "--op", "gate_residual", "--device", "cpu")


def audit_process(*args: str, env: dict | None = None, limit_bytes: int | None = None, tmpdir: Path | None = None):
    """``audit ARGS`` as a child process (under a real address-space limit when given), whose
    workers start as new interpreters (children of the command, as from a shell: without
    $AUDIT_TEMPLATES), with ``tmpdir`` as their TMPDIR when given."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))

    extra = {"TMPDIR": str(tmpdir)} if tmpdir else {}
    shell = {k: v for k, v in os.environ.items() if k != launch.TEMPLATES_ENV}
    return subprocess.Popen(
        [sys.executable, "-m", "audit", *args],
        cwd=REPO,
        env={**shell, "COLUMNS": "200", **extra, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=limit if limit_bytes else None,
    )


def finish(proc: subprocess.Popen, timeout: float = 300) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def results(path: Path) -> dict:
    return json.loads(path.read_text())["results"]


def worker_of(proc: subprocess.Popen, deadline_s: float = 120) -> int:
    """The pid of the audit process's mode process, as soon as it exists."""
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline and proc.poll() is None:
        for pid in children.read_text().split():
            try:
                if b"audit.worker.main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return int(pid)
            except FileNotFoundError:
                pass
        time.sleep(0.01)
    raise AssertionError("no mode process appeared")


def resident_mb(pid: int) -> float:
    """The resident memory of process ``pid`` in MB, from /proc."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) / 1024


def wait_for(pattern: str, root: Path, proc: subprocess.Popen, deadline_s: float = 180) -> None:
    deadline = time.monotonic() + deadline_s
    while not any(root.glob(pattern)):
        assert time.monotonic() < deadline and proc.poll() is None, f"never saw {pattern}"
        time.sleep(0.05)


# D1 ------------------------------------------------------------------------------------------


def test_d1_out_of_memory_while_drawing_loses_that_case_only(tmp_path):
    """Under a real 5 GB address-space limit, drawing 1,000,000 rows fails; case 1 stays."""
    out = tmp_path / "oom.json"
    proc = audit_process(
        *RUN,
        "--case",
        "1",
        "--case",
        "1000000",
        "--candidate",
        "diffusers",
        "--out",
        str(out),
        "-q",
        limit_bytes=5 * 10**9,
    )
    code, _, err = finish(proc)
    assert code == 0, err
    got = results(out)
    for name, ref in (("diffusers", "rl_kernel"), ("rl_kernel", "diffusers")):
        assert got[name][f"vs {ref}"]["1"]["out"][0]["equal"] is True
        lost = got[name][f"vs {ref}"]["1000000"]["unavailable"]
        assert "the inputs of case 1000000 could not be drawn: RuntimeError" in lost and "allocate" in lost, lost


def test_d1_a_kill_while_drawing_loses_that_case_only(tmp_path):
    """SIGKILL (what the OOM killer sends) while case 20000's inputs are drawn (seconds on a CPU)."""
    out, scratch = tmp_path / "killed.json", tmp_path / "tmp"
    scratch.mkdir()
    proc = audit_process(
        *RUN, "--case", "1", "--case", "20000", "--candidate", "diffusers", "--out", str(out), "-q", tmpdir=scratch
    )
    worker = worker_of(proc)
    wait_for("audit-*/references/1/rl_kernel.safetensors", scratch, proc)  # case 1 is ending
    base = resident_mb(worker)
    deadline = time.monotonic() + 120
    while resident_mb(worker) < base + 200:  # 20000 rows are being drawn (over 1 GB, seconds on a CPU)
        assert time.monotonic() < deadline, "the worker never started drawing case 20000"
        time.sleep(0.02)
    os.kill(worker, signal.SIGKILL)
    code, _, err = finish(proc)
    assert code == 0, err
    got = results(out)
    assert got["diffusers"]["vs rl_kernel"]["1"]["out"][0]["equal"] is True
    assert list(json.loads(out.read_text())["inputs_sha256"]) == ["1"], "the restarted process drew case 20000 again"
    for name, ref in (("diffusers", "rl_kernel"), ("rl_kernel", "diffusers")):
        lost = got[name][f"vs {ref}"]["20000"]["unavailable"]
        assert "mode plain process was killed by SIGKILL while drawing the inputs of case 20000" in lost, lost


def test_d1_a_kill_at_start_up_keeps_each_candidates_own_reason(tmp_path):
    out = tmp_path / "startup.json"
    proc = audit_process("run", "--op", "norm_modulate", "--device", "cpu", "--case", "1", "--out", str(out), "-q")
    os.kill(worker_of(proc), signal.SIGKILL)  # still importing torch
    code, _, err = finish(proc)
    assert code == 0, err
    got = results(out)
    assert got["diffusers"]["vs rl_kernel"]["1"]["out"][0]["equal"] is True
    unavailable = {n: r["unavailable"] for n, r in got.items() if "unavailable" in r}
    assert unavailable and all("SIGKILL" not in why for why in unavailable.values()), unavailable
    assert "needs a CUDA device" in unavailable["liger"]


# D2 and D7: one run with a candidate that exits, one that raises past the worker, one that floods,
# and one whose prepare fails


@pytest.fixture(scope="module")
def crash_report(tmp_path_factory) -> dict:
    """The whole report; the workers are new interpreters (``audit_process``), so the start of the
    one that dies without a word is in its unaccounted time."""
    out = tmp_path_factory.mktemp("crash") / "r.json"
    proc = audit_process(
        *RUN,
        "--case",
        "1",
        "--candidate",
        "exits",
        "--candidate",
        "raises_base",
        "--candidate",
        "floods",
        "--candidate",
        "prepare_fails",
        "--out",
        str(out),
        "-q",
        env=FAULTY,
    )
    code, _, err = finish(proc)
    assert code == 0, err
    return json.loads(out.read_text())


def test_d2_a_worker_that_exits_or_raises_is_reported_as_it_ended(crash_report):
    found = crash_report["results"]
    exits, raises = found["exits"]["unavailable"], found["raises_base"]["unavailable"]
    assert exits.startswith("mode plain process exited with status 0 after raising SystemExit: 0 while running case 1")
    assert raises.startswith(
        "mode plain process exited with status 1 after raising PlantedBaseException: "
        "planted process-ending failure while running case 1"
    )
    assert "-9" not in exits + raises


def test_d7_a_20_mb_line_becomes_a_bounded_reason_that_keeps_its_tail(crash_report):
    reason = crash_report["results"]["floods"]["unavailable"]
    assert reason.startswith("mode plain process exited with status 5 while running case 1")
    assert len(reason) < 4300 and "[cut to its last 4,096 characters]" in reason
    assert reason.endswith("END OF THE FLOOD")


def test_a_candidate_whose_prepare_fails_is_unavailable_with_the_reason(crash_report):
    assert crash_report["results"]["prepare_fails"] == {"unavailable": "prepare: RuntimeError: planted build failure"}


def test_the_processes_that_died_are_counted_and_their_time_left_unaccounted(crash_report):
    """Three candidates end their process, one each: three plain-mode processes. Two raise, and
    send their phases as they end; the one that floods exits at once (os._exit), so its time is in
    the wall time and in no phase."""
    plain = crash_report["timing"]["modes"]["plain"]
    assert plain["processes"] == 3
    assert plain["phases"]["compute"] > 0 and plain["phases"]["exit"] > 0
    assert plain["wall"] - sum(plain["phases"].values()) > 0.5  # at least its interpreter's start


# D3 ------------------------------------------------------------------------------------------


def _bad_out(tmp: Path) -> dict[str, tuple[list[str], str]]:
    (tmp / "dir.json").mkdir()
    (tmp / "file").write_text("")
    return {
        "directory as file": (["--out", str(tmp / "dir.json")], "is a directory"),
        "parent is a file": (["--out", str(tmp / "file" / "r.json")], "is not a directory"),
        "proc": (["--out", "/proc/r.json"], "cannot write in /proc"),
        "several ops, one file": (["--op", "all", "--out", str(tmp / "r.json")], "give a directory"),
        "txt": (["--out", str(tmp / "report.txt")], "must end in .json"),
    }


@pytest.mark.parametrize("case", ["directory as file", "parent is a file", "proc", "several ops, one file", "txt"])
def test_d3_a_bad_out_is_one_line_and_status_2_before_anything_runs(tmp_path, case):
    args, words = _bad_out(tmp_path)[case]
    run = ["run", "--device", "cpu", "--case", "1", *(["--op", "gate_residual"] if "--op" not in args else []), *args]
    start = time.monotonic()
    done = CliRunner().invoke(app, run)
    assert done.exit_code == 2 and time.monotonic() - start < 30, done.output
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and words in lines[0], done.stderr
    assert not (tmp_path / "report.txt").exists()


@pytest.mark.parametrize("name, words", [("dir.png", "is a directory"), ("plot.txt", "must end in .png")])
def test_d3_plot_out_gets_the_same_checks(tmp_path, name, words):
    (tmp_path / "dir.png").mkdir()
    report = REPO / "tests" / "fixtures" / "h3_bitwise_reuse.gate_residual.json"
    done = CliRunner().invoke(app, ["plot", str(report), "--out", str(tmp_path / name)])
    assert done.exit_code == 2 and words in done.stderr, done.output


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_d3_a_read_only_directory_is_refused(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    done = CliRunner().invoke(app, ["run", "--op", "gate_residual", "--out", str(ro / "r.json")])
    assert done.exit_code == 2 and "cannot write in" in done.stderr


def test_d3_d9_a_symlink_is_written_through_markup_prints_as_is_and_cases_are_deduplicated(tmp_path):
    target = tmp_path / "a[" / "b]" / "target.json"
    target.parent.mkdir(parents=True)
    link = tmp_path / "run[v2].json"
    link.symlink_to(target)
    old = os.umask(0o022)
    try:
        done = CliRunner().invoke(
            app, [*RUN, "--case", "1", "--case", "1", "--candidate", "diffusers", "--out", str(link)]
        )
    finally:
        os.umask(old)
    assert done.exit_code == 0, done.output
    assert link.is_symlink() and target.is_file()
    assert f"wrote {target}" in done.stdout  # rich markup in the path is printed, not interpreted
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    report = json.loads(target.read_text())
    assert report["cases"] == [1] and list(report["results"]["diffusers"]["vs rl_kernel"]) == ["1"]


# D4: SIGTERM, for every command, is in test_launch.py


# D5 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["nan", "0", "-5"])
def test_d5_a_timeout_that_is_not_positive_is_a_usage_error(value):
    done = CliRunner().invoke(app, [*RUN, "--timeout", value])
    assert done.exit_code == 2 and "greater than 0" in done.output


# D6 ------------------------------------------------------------------------------------------


SHELL = {"TRITON_F32_DEFAULT": "ieee", "CUBLAS_WORKSPACE_CONFIG": ":4096:8", "VLLM_BATCH_INVARIANT": "1"}


def test_d6_the_shells_numerics_variables_stay_out_unless_inherited_and_are_recorded(tmp_path):
    out = tmp_path / "env.json"
    done = audit_in_process(
        *RUN,
        *"--case 1 --candidate env_probe --inherit-env CUBLAS_WORKSPACE_CONFIG --out".split(),
        str(out),
        "-q",
        env={**FAULTY, **SHELL},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    seen = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    assert report["results"]["env_probe"]["source"].endswith(json.dumps(seen))
    recorded = report["environment"]["mode_environment"]["plain"]
    assert {k: v for k, v in recorded.items() if is_numerics_variable(k)} == seen


def test_d6_a_modes_own_variables_win_and_everything_else_numeric_is_removed():
    shell = {**SHELL, "SGLANG_X": "1", "NVTE_Y": "2", "HOME": "/h", "LD_PRELOAD": "x.so", "NCCL_ALGO": "Ring"}
    env, recorded = worker_variables(shell, get_mode("vllm"), inherit=("CUBLAS_WORKSPACE_CONFIG",))
    assert recorded == {
        "CUBLASLT_WORKSPACE_SIZE": "1",
        "CUBLAS_WORKSPACE_CONFIG": ":16:8",
        "LD_PRELOAD": "x.so",
        "NCCL_ALGO": "Ring",
    }
    assert env["HOME"] == "/h" and not {"TRITON_F32_DEFAULT", "VLLM_BATCH_INVARIANT", "SGLANG_X", "NVTE_Y"} & set(env)


def test_d6_inheriting_an_unset_variable_is_a_usage_error():
    done = CliRunner().invoke(app, [*RUN, "--inherit-env", "NO_SUCH_VARIABLE_HERE"])
    assert done.exit_code == 2 and "NO_SUCH_VARIABLE_HERE not set" in done.stderr


# D8 ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [[*RUN, "--case", "1"], ["list", "--device", "cpu"]])
@pytest.mark.parametrize(
    "plugin, why",
    [("no_such_plugin_module", "ModuleNotFoundError"), ("tests.plugins.exits_at_import", "SystemExit: 3")],
)
def test_d8_a_bad_plugin_module_is_one_line_naming_it_and_status_2(command, plugin, why):
    done = CliRunner().invoke(app, command, env={"AUDIT_PLUGINS": plugin})
    assert done.exit_code == 2, done.output
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and f"AUDIT_PLUGINS: cannot load module '{plugin}': {why}" in lines[0], done.stderr
