"""Repeatability in the bitwise task, end to end in real mode processes on the CPU."""

from tests.helpers import audit

from reports.io import load_report
from reports.bitwise import verdicts as bitwise_verdicts

FLAKY = {"AUDIT_PLUGINS": "tests.plugins.flaky"}


def test_a_gradient_that_changes_between_runs_is_marked_nondeterministic(tmp_path):
    out = tmp_path / "r.json"
    done = audit(
        *"run --op gate_residual --device cpu --case 3 --candidate flaky_gate_grad".split(),
        "--out",
        str(out),
        "-q",
        env=FLAKY,
    )
    assert done.returncode == 0, done.stderr
    report = load_report(out).root
    for ref in ("diffusers", "rl_kernel"):
        case = report.results["flaky_gate_grad"].__pydantic_extra__[f"vs {ref}"]["3"]
        gate = case.grads["gate"]
        # each run moved a different element by one ULP: two elements differ between runs
        assert gate.repeatable is False and gate.repeat_differ == 2
        assert all(c.repeatable is True for c in [*case.out, case.grads["res"], case.grads["y"]])
    # the references themselves were repeated, and are repeatable
    refs = report.results["diffusers"].__pydantic_extra__["vs rl_kernel"]["3"]
    assert all(c.repeatable is True for c in [*refs.out, *refs.grads.values()])
    found = {(v.candidate, v.reference): v for v in bitwise_verdicts(report)}
    flaky = found[("flaky_gate_grad", "diffusers")]
    assert flaky.verdict == "nondeterministic" and flaky.detail.startswith("dgate not repeatable")
    assert found[("diffusers", "rl_kernel")].verdict == "reusable"


def test_repeats_1_turns_the_check_off(tmp_path):
    out = tmp_path / "r.json"
    done = audit(
        *"run --op gate_residual --device cpu --case 2 --candidate flaky_gate_grad --repeats 1".split(),
        "--out",
        str(out),
        "-q",
        env=FLAKY,
    )
    assert done.returncode == 0, done.stderr
    data = load_report(out).model_dump(mode="json")
    cmp = data["results"]["flaky_gate_grad"]["vs diffusers"]["2"]["grads"]["gate"]
    assert "repeatable" not in cmp and "repeat_differ" not in cmp
