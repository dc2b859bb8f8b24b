"""The skeleton of the commands that compute and write (``audit.cli.session``): a report that cannot
be written, or a temporary directory that cannot be made, is one line and exit 3, never a
traceback or the status 1 that means a finding."""

import errno

import pytest
from typer.testing import CliRunner

import audit.parent.launch
import reports.io
from audit.cli import app
from audit.cli.session import WRITE_FAILED
from tests.helpers import FIXTURES

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
    assert (
        "--fail-on differ: a difference, first: timestep_mlp: diffusers[plain] vs rl_kernel: differs (out from case 1"
        in (done.stderr)
    )
