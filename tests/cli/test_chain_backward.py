"""``audit chain --backward`` with the provider's backward under control, on the CPU (real worker
processes, a reduced block): a planted non-repeatable attention backward
(``tests/plugins/flaky_attention.py``) marks every gradient upstream of attention nondeterministic
and none as drift; with ``--deterministic`` the provider's backward repeats bit for bit, the
variable is recorded, and the report says which backend ran."""

from reports.io import load_report
from reports.kinds import KINDS
from tests.helpers import audit, audit_in_process

SMALL = ["--device", "cpu", "--hidden", "64", "--heads", "2", "--ffn", "128", "--backward"]
UPSTREAM = ("time_proj", "timestep_mlp", "adaln_projection", "norm1_modulate", "attention")


def _chain(tmp_path, *more: str, env=None, run=audit_in_process):
    """``audit chain --backward`` into ``tmp_path``; ``run=audit`` where a plugin patches the process."""
    out = tmp_path / "chain.json"
    done = run("chain", *SMALL, "--candidate", "all=provider", *more, "--out", str(out), "-q", env=env)
    assert done.returncode == 0, done.stderr
    report = load_report(out).root
    return report, report.results["plain"].lengths["17"]


def test_a_planted_non_repeatable_attention_backward_is_reported_as_such(tmp_path):
    report, replay = _chain(tmp_path, env={"AUDIT_PLUGINS": "tests.plugins.flaky_attention"}, run=audit)
    stages = {s.stage: s for s in replay.stages}
    assert all(c.repeatable is False for name in UPSTREAM for c in stages[name].grads.values())
    assert stages["ff"].grads["n2"].repeatable and stages["norm_out"].grads["h2"].repeatable
    assert replay.first_grad_drift is None and replay.drop_in.forward and replay.drop_in.backward is False
    assert [v.verdict for v in KINDS[report.kind].verdicts(report)] == ["nondeterministic"]


def test_with_deterministic_the_providers_backward_repeats_and_the_setting_is_recorded(tmp_path):
    report, replay = _chain(tmp_path, "--deterministic", "--attention", "math")
    grads = [c for s in replay.stages for c in s.grads.values()]
    assert grads and all(c.equal and c.repeatable for c in grads)
    assert replay.drop_in.backward is True
    assert report.environment.mode_environment["plain"]["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert report.sdpa.model_dump() == {
        "attention": "math",
        "deterministic": True,
        "default": False,
        "ran": {"plain": "math"},
    }


def test_the_default_with_backward_is_the_cpus_repeatable_setting_and_says_what_ran(tmp_path):
    report, replay = _chain(tmp_path)
    assert replay.drop_in.backward is True
    assert report.sdpa.model_dump() == {
        "attention": "auto",
        "deterministic": False,
        "default": True,
        "ran": {"plain": "flash"},
    }
    assert "CUBLAS_WORKSPACE_CONFIG" not in report.environment.mode_environment["plain"]
