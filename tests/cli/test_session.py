"""The skeleton of the commands that compute and write (``audit.cli.session``): a report that cannot
be written, or a temporary directory that cannot be made, is one line and exit 3, never a
traceback or the status 1 that means a finding."""

import errno
import json

import pytest
from typer.testing import CliRunner

import audit.parent.launch
import reports.io
from audit.cli import app
from audit.cli.session import WRITE_FAILED
from tests.helpers import FIXTURES, REPO

RUN = ["run", "--op", "gate_residual", "--case", "1", "--device", "cpu", "-q"]


def _disk_full(path):
    raise OSError(errno.ENOSPC, "No space left on device", str(path))


def test_a_report_that_cannot_be_written_is_one_line_naming_it_and_exit_3(tmp_path, monkeypatch):
    monkeypatch.setattr(reports.io, "write_report", lambda path, data: _disk_full(path))
    done = CliRunner().invoke(app, [*RUN, "--out", str(tmp_path / "r.json")])
    assert done.exit_code == WRITE_FAILED == 3, done.output
    line = done.stderr.strip().splitlines()[-1]
    assert line == f"error: cannot write {tmp_path / 'r.json'}: No space left on device; reports already written: none"
    assert "Traceback" not in done.output


CHAIN = ["chain", "--hidden", "256", "--heads", "2", "--ffn", "512", "--device", "cpu"]


@pytest.mark.parametrize("command", [RUN, CHAIN])
def test_a_full_temporary_directory_is_one_line_and_exit_3(tmp_path, monkeypatch, command):
    monkeypatch.setattr(audit.parent.launch.tempfile, "mkdtemp", lambda prefix: _disk_full(f"/tmp/{prefix}x"))
    done = CliRunner().invoke(app, [*command, "--out", str(tmp_path)])
    assert done.exit_code == 3, done.output
    assert "No space left on device" in done.stderr.strip().splitlines()[-1] and "Traceback" not in done.output


def test_a_baseline_is_checked_against_the_reports_that_will_be_written_before_anything_runs(tmp_path):
    (tmp_path / "baseline").mkdir()
    seed = FIXTURES / "h3_bitwise_reuse.gate_residual.json"  # a row op: --mode vllm writes no report for it
    (tmp_path / "baseline" / "r.json").write_text(seed.read_text())
    argv = ["run", "--op", "all", "--mode", "vllm", "--device", "cpu", "--baseline", str(tmp_path / "baseline")]
    done = CliRunner().invoke(app, [*argv, "--out", str(tmp_path / "out")])
    assert done.exit_code == 2, done.output
    assert "holds no h3_bitwise_reuse report for timestep_mlp, adaln_projection" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_run_closes_with_one_line_per_report_and_a_failing_gate_names_the_first_difference(tmp_path):
    argv = ["run", "--op", "timestep_mlp", "--case", "1", "--mode", "plain", "--device", "cpu", "-q"]
    done = CliRunner().invoke(app, [*argv, "--fail-on", "differ", "--out", str(tmp_path)])
    assert done.exit_code == 1, done.output
    assert "timestep_mlp: 1 differs" in done.stdout.splitlines()
    assert "diffusers[plain] vs rl_kernel: differs (out from case 1" in done.stderr


def test_a_requested_candidate_that_did_not_run_fails_fail_on_differ(tmp_path):
    """sglang's fused kernel cannot run on a CPU: the run must not pass as bitwise clean."""
    argv = [*RUN, "--candidate", "sglang_fused_residual", "--fail-on", "differ", "--out", str(tmp_path / "r.json")]
    done = CliRunner().invoke(app, argv)
    assert done.exit_code == 1, done.output
    assert "the requested candidate sglang_fused_residual did not run" in done.stderr


def test_coverage_lost_against_the_baseline_fails_the_gate_unless_allowed(tmp_path, gate_residual_case_1):
    data = json.loads(gate_residual_case_1.read_text())  # [*RUN, "--candidate", "diffusers"], exit 0 (conftest)
    data["cases"].append(2)  # the baseline also had a case of 2 rows, which this run leaves out
    for name, ref in (("diffusers", "rl_kernel"), ("rl_kernel", "diffusers")):
        data["results"][name][f"vs {ref}"]["2"] = data["results"][name][f"vs {ref}"]["1"]
    (tmp_path / "baseline.json").write_text(json.dumps(data))
    gated = [
        *RUN,
        "--candidate",
        "diffusers",
        "--out",
        str(tmp_path / "b.json"),
        "--baseline",
        str(tmp_path / "baseline.json"),
    ]
    done = CliRunner().invoke(app, gated)
    assert done.exit_code == 1 and "0 regressions" in done.stderr and "1 lost" in done.stderr, done.output
    assert "case 2" in done.stdout
    done = CliRunner().invoke(app, [*gated, "--allow-missing", "2"])
    assert done.exit_code == 0 and "1 lost (1 allowed by --allow-missing)" in done.stdout, done.output


def test_gate_options_are_checked_before_anything_runs(tmp_path):
    out = tmp_path / "out"
    done = CliRunner().invoke(app, [*RUN, "--allow-missing", "all", "--out", str(out)])
    assert done.exit_code == 2 and "--allow-missing needs --baseline" in done.stderr
    seed = str(FIXTURES / "h3_bitwise_reuse.gate_residual.json")
    done = CliRunner().invoke(app, [*RUN, "--baseline", seed, "--max-size", "0.001", "--out", str(out)])
    assert done.exit_code == 2 and "--max-size raises it" in done.stderr
    h200 = str(REPO / "docs" / "evidence" / "h200" / "chain" / "h3_conditioning_chain_replay.liger.json")
    done = CliRunner().invoke(app, [*CHAIN, "--baseline", h200, "--out", str(out)])
    assert done.exit_code == 2 and "different problems (block.hidden 5376 vs 256" in done.stderr
    assert "--allow-different-problem" in done.stderr
    assert not out.exists()
