"""The pytest plugin (``audit.pytest_plugin``), as a kernel author uses it: the documented example
passes for a reusable candidate, and a planted one fails with its verdict line."""

import subprocess
import sys

from tests.helpers import REPO

EXAMPLE = REPO / "docs" / "examples" / "test_own_kernel.py"
PLANTED = """
import torch

from audit.core.candidates import candidate


@candidate("one_rounding", ops=("gate_residual",), source="planted: res + gate * y rounded once, in fp32")
def one_rounding(t):
    return (t["res"].float() + t["gate"].index_select(0, t["idx"]).float() * t["y"].float()).to(t["res"].dtype)


def test_one_rounding_is_bitwise_the_reference(bitwise_audit):
    bitwise_audit.assert_reusable("one_rounding", op="gate_residual", reference="diffusers", cases=[33])
"""


def pytest_run(path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_documented_example_passes_for_a_reusable_candidate():
    done = pytest_run(EXAMPLE)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 passed" in done.stdout


def test_a_candidate_that_is_not_bitwise_the_reference_fails_with_its_verdict(tmp_path):
    planted = tmp_path / "test_planted.py"
    planted.write_text(PLANTED)
    done = pytest_run(planted)
    assert done.returncode == 1, done.stdout[-3000:]
    assert "one_rounding vs diffusers (gate_residual): differs — out from case 33" in done.stdout


def test_a_mode_other_than_plain_or_a_bad_case_is_refused_before_anything_is_computed(tmp_path):
    asked = tmp_path / "test_asked.py"
    asked.write_text(
        "def test_under_vllm(bitwise_audit):\n"
        '    bitwise_audit.assert_reusable("diffusers[vllm]", op="adaln_projection", reference="diffusers[plain]")\n'
        "def test_bare_name_of_a_candidate_of_every_mode(bitwise_audit):\n"
        '    bitwise_audit.assert_reusable("diffusers", op="adaln_projection")\n'
        "def test_no_rows(bitwise_audit):\n"
        '    bitwise_audit.assert_reusable("rl_kernel", op="gate_residual", reference="diffusers", cases=[1, 0])\n'
    )
    done = pytest_run(asked)
    assert done.returncode == 1, done.stdout[-3000:]
    assert "3 failed" in done.stdout
    out = " ".join(done.stdout.split())
    assert "bitwise_audit: diffusers[vllm] runs in mode vllm, and the fixture computes in the test's own process" in out
    assert "bitwise_audit: 'diffusers': diffusers runs under every mode, so its report name is diffusers[MODE]" in out
    assert "bitwise_audit: cases [0]: a case is a count of rows, an int from 1" in out
