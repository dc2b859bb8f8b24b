"""``audit trajectory`` end to end on the CPU (real worker processes, a reduced block): an identical
candidate chain stays equal at every step (also with one fused call serving gate_residual_msa and
norm2_modulate, recorded as such), a planted one-ULP change in the velocity at step k makes
k the first differing step, bad input exits 2 before anything runs, and a backend the CPU cannot
run makes the mode unavailable with the reason. The planted candidate is a test double
(``tests/plugins/trajectory_planted.py``)."""

import json

import pytest
from typer.testing import CliRunner

from audit.cli import app
from reports.io import load_report
from reports.kinds import KINDS
from tests.helpers import audit_in_process

SMALL = ["--device", "cpu", "--hidden", "64", "--heads", "2", "--ffn", "128"]
STEPS = 6
PLANTED = ["--candidate", "all=provider", "--candidate", "norm_out=ulp_at_step", "--steps", str(STEPS)]


def _trajectory(tmp_path, step: int, *more: str):
    out = tmp_path / f"step{step}.json"
    env = {"AUDIT_PLUGINS": "tests.plugins.trajectory_planted", "PLANTED_STEP": str(step), "PLANTED_STEPS": str(STEPS)}
    done = audit_in_process("trajectory", *SMALL, *PLANTED, *more, "--out", str(out), "-q", env=env)
    assert done.returncode == 0, done.stderr
    report = load_report(out).root
    return report, report.results["plain"].lengths["17"]


def test_an_identical_candidate_chain_stays_equal_at_every_step(tmp_path):
    report, run = _trajectory(tmp_path, -1, "--candidate", "gate_residual_msa=diffusers")
    assert run.stages["norm_out"].name == "ulp_at_step" and run.stages["gate_residual_msa"].name == "diffusers"
    assert len(run.steps) == STEPS and len(report.timesteps) == STEPS
    assert all(s.cmp.equal and s.cmp.repeatable and s.psnr is None and s.rel_max_abs == 0 for s in run.steps)
    assert run.first_differ is None and run.trend is None
    assert [v.verdict for v in KINDS[report.kind].verdicts(report)] == ["equal"]


def test_one_fused_call_for_gate_residual_msa_and_norm2_modulate_is_recorded_and_stays_equal(tmp_path):
    out = tmp_path / "fused.json"
    pair = "gate_residual_msa+norm2_modulate"
    chosen = f"--steps 2 --candidate all=provider --candidate {pair}=rl_kernel".split()
    done = audit_in_process("trajectory", *SMALL, *chosen, "--out", str(out))
    assert done.returncode == 0, done.stderr
    report = load_report(out).root
    assert report.candidates[pair] == "rl_kernel" and not {"gate_residual_msa", "norm2_modulate"} & set(
        report.candidates
    )
    run = report.results["plain"].lengths["17"]
    for stage in pair.split("+"):
        assert run.stages[stage].name == "rl_kernel" and run.stages[stage].serves == pair.split("+")
    assert all(s.cmp.equal and s.cmp.repeatable for s in run.steps)
    assert f"norm2_modulate=rl_kernel (one call: {pair})" in " ".join(done.stdout.split())  # however it wraps


@pytest.mark.parametrize("step", [1, 4])
def test_the_first_differing_step_moves_with_a_planted_one_ulp_change(tmp_path, step):
    report, run = _trajectory(tmp_path, step)
    assert run.first_differ == step and run.trend in ("grows", "stays", "fades")
    assert all(s.cmp.equal for s in run.steps[:step])
    assert all(s.cmp.repeatable for s in run.steps)
    assert run.steps[step].cmp.differ >= 1 and run.steps[step].psnr is not None
    verdict = KINDS[report.kind].verdicts(report)[0]
    assert verdict.verdict == "drifts" and f"step {step}" in verdict.detail


@pytest.mark.parametrize(
    "args, said",
    [
        (["--steps", "0"], "--steps must be at least 1"),
        (["--steps", "-3"], "--steps must be at least 1"),
        (["--attention", "sparse"], "--attention: unknown backend 'sparse'"),
    ],
)
def test_bad_steps_or_backend_is_one_line_and_status_2_before_anything_runs(tmp_path, args, said):
    out = tmp_path / "never.json"
    done = CliRunner().invoke(app, ["trajectory", *SMALL, *args, "--out", str(out)])
    assert done.exit_code == 2 and said in done.stderr, done.output
    assert len(done.stderr.strip().splitlines()) == 1 and not out.exists()


def test_an_unknown_backend_is_refused_by_chain_too(tmp_path):
    done = CliRunner().invoke(app, ["chain", *SMALL, "--attention", "xformers", "--out", str(tmp_path / "x.json")])
    assert done.exit_code == 2 and "unknown backend 'xformers'" in done.stderr


def test_a_backend_the_cpu_cannot_run_makes_the_mode_unavailable_with_the_reason(tmp_path):
    out = tmp_path / "efficient.json"
    done = audit_in_process("trajectory", *SMALL, "--steps", "2", "--attention", "efficient", "--out", str(out), "-q")
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert "--attention efficient cannot run here at length 17" in data["results"]["plain"]["unavailable"]
    assert data["sdpa"] == {"attention": "efficient", "deterministic": False, "default": False, "ran": {}}
