"""The benchmark scripts refuse what they cannot run with one line and exit status 2 before they
time anything, find ``bench_common`` beside them also under ``python -P``, and keep the steps that
finished when one stops."""

import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from tests.helpers import REPO

SCRIPTS = ("bench_row_ops.py", "bench_gemm_ops.py")
without_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="this run would start a benchmark on a GPU")


def bench(script: str, *args: str) -> subprocess.CompletedProcess:
    """``python -P benchmarks/SCRIPT ARGS``: Python leaves the script's folder off sys.path."""
    command = [sys.executable, "-P", str(REPO / "benchmarks" / script), *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)


@without_cuda
@pytest.mark.parametrize("script", SCRIPTS)
def test_a_benchmark_without_a_cuda_device_says_so_in_one_line_and_exits_2(script, tmp_path):
    out = tmp_path / "bench.json"
    done = bench(script, "--out", str(out))
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"{script}: needs a CUDA device; torch {torch.__version__} sees none"]
    assert not out.exists()


@without_cuda
@pytest.mark.parametrize("where", ["missing folder", "a folder"])
def test_a_benchmark_refuses_an_out_it_cannot_write_before_looking_for_a_device(where, tmp_path):
    out = tmp_path / "missing" / "bench.json" if where == "missing folder" else tmp_path
    done = bench("bench_row_ops.py", "--out", str(out))
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"bench_row_ops.py: --out {out}") and "CUDA" not in line


def _run_steps():
    """``bench_common.run_steps``, imported from beside the benchmarks as they import it."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from bench_common import run_steps
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    return run_steps


def _stop_with(kind: str) -> None:
    if kind == "error":
        raise RuntimeError("out of luck\nsecond line")
    if kind == "ctrl-c":
        raise KeyboardInterrupt
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)  # the handler raises within this sleep
    raise AssertionError("SIGTERM did not stop the step")


@pytest.mark.parametrize(
    ("kind", "stopped", "status"),
    [
        ("error", "RuntimeError in second: out of luck", 1),
        ("ctrl-c", "interrupted (Ctrl-C) in second", 130),
        ("sigterm", "terminated (SIGTERM) in second", 143),
        (None, None, 0),
    ],
)
def test_a_stopped_step_ends_the_run_and_says_where_and_the_steps_before_it_are_kept(kind, stopped, status):
    ran: list[str] = []
    before = signal.getsignal(signal.SIGTERM)

    def step(name: str):
        def run() -> str:
            if name == "second" and kind:
                _stop_with(kind)
            ran.append(name)
            return f"{name}'s result"

        return run

    done, *ended = _run_steps()({name: step(name) for name in ("first", "second", "third")})
    assert ended == [stopped, status]
    assert ran == (["first"] if kind else ["first", "second", "third"])
    assert done == {name: f"{name}'s result" for name in ran}
    assert signal.getsignal(signal.SIGTERM) is before
