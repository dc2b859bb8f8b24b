"""The benchmark scripts refuse what they cannot run with one line and exit status 2 before they
time anything, and they find ``bench_common`` beside them also under ``python -P``."""

import subprocess
import sys

import pytest
import torch

from tests.helpers import REPO

SCRIPTS = ("bench_row_ops.py", "bench_gemm_ops.py")
pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="these runs would start a benchmark on a GPU")


def bench(script: str, *args: str) -> subprocess.CompletedProcess:
    """``python -P benchmarks/SCRIPT ARGS``: Python leaves the script's folder off sys.path."""
    command = [sys.executable, "-P", str(REPO / "benchmarks" / script), *args]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_benchmark_without_a_cuda_device_says_so_in_one_line_and_exits_2(script, tmp_path):
    out = tmp_path / "bench.json"
    done = bench(script, "--out", str(out))
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"{script}: needs a CUDA device; torch {torch.__version__} sees none"]
    assert not out.exists()


@pytest.mark.parametrize("where", ["missing folder", "a folder"])
def test_a_benchmark_refuses_an_out_it_cannot_write_before_looking_for_a_device(where, tmp_path):
    out = tmp_path / "missing" / "bench.json" if where == "missing folder" else tmp_path
    done = bench("bench_row_ops.py", "--out", str(out))
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"bench_row_ops.py: --out {out}") and "CUDA" not in line
