"""Repeatability in the bitwise task, end to end in real mode processes on the CPU, and the symmetry
of its comparison entries."""

from tests.helpers import audit_in_process

from reports.io import load_report
from reports.bitwise import verdicts as bitwise_verdicts

FLAKY = {"AUDIT_PLUGINS": "tests.plugins.flaky"}


def test_a_gradient_that_changes_between_runs_is_marked_nondeterministic(tmp_path):
    out = tmp_path / "r.json"
    done = audit_in_process(
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
    done = audit_in_process(
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


def test_a_comparison_is_the_same_both_ways_unless_the_shapes_differ():
    """The earlier reference's comparison with a later one reuses the later one's (``_symmetric``):
    every field agrees both ways, on values with NaN, Inf, signed zeros and subnormals, with the
    repeats of each side; a shape mismatch is worded in order, so it is computed again."""
    import torch

    from audit.core.ops import get_op
    from audit.worker.bitwise import _symmetric, compare_results

    op = get_op("gate_residual")
    g = torch.Generator().manual_seed(3)

    def side(shift: float) -> tuple:
        x = torch.randn(300, 64, generator=g)
        x = (x + shift * torch.randn(300, 64, generator=g)).bfloat16()
        x[0, :4] = torch.tensor([float("nan"), float("inf"), -0.0, 1e-40])
        return [x], {"res": x[:, :32].clone(), "gate": x[:9].clone()}

    a, b = side(0.0), side(0.01)
    reps_a, reps_b = {"out.0": 0, "grad.res": 3, "grad.gate": 0}, {"out.0": 2, "grad.res": 0, "grad.gate": 0}
    forward = compare_results(op, a, b, reps_a, reps_b)
    assert _symmetric(forward) and forward == compare_results(op, b, a, reps_b, reps_a)
    assert forward["out"][0]["differ"] > 0 and forward["grads"]["res"]["repeatable"] is False
    shorter = ([b[0][0][:299]], b[1])
    mismatched = compare_results(op, a, shorter)
    assert not _symmetric(mismatched) and mismatched != compare_results(op, shorter, a)
