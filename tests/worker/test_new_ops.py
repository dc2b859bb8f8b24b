"""The ops added for the engines' kernels (gate_residual_norm_modulate, timestep_sinusoid,
final_adaln_out), end to end on the CPU: the bitwise and prior-art reports of both references, their
shapes, their fields and their verdicts."""

import pytest
import torch

from adapters import diffusers as diffusers_adapter
from audit.core.candidates import get_candidate
from audit.core.inputs import draw_inputs
from audit.core.ops import HIDDEN, TIMESTEPS, get_op
from reports.bitwise import verdicts as bitwise_verdicts
from reports.io import load_report
from reports.prior_art import verdicts as prior_art_verdicts
from tests.helpers import audit_in_process

ROWS = 9
GRADS = {
    "gate_residual_norm_modulate": {"res", "y", "gate", "w", "sh", "sc"},
    "timestep_sinusoid": set(),
    "final_adaln_out": {"x", "w", "temb", "wp", "bp"},
}
OUT_NUMEL = {"gate_residual_norm_modulate": ROWS * 2 * HIDDEN, "timestep_sinusoid": ROWS * 256}


def _bitwise(tmp_path, op: str):
    """The bitwise report in plain mode: the tests read only plain mode's comparisons."""
    out = tmp_path / f"{op}.json"
    argv = ["run", "--op", op, "--device", "cpu", "--case", str(ROWS), "--mode", "plain", "--out", str(out), "-q"]
    done = audit_in_process(*argv)
    assert done.returncode == 0, done.stderr
    return load_report(out).root


@pytest.mark.parametrize("op", sorted(GRADS))
def test_bitwise_report_of_both_references(tmp_path, op):
    report = _bitwise(tmp_path, op)
    assert report.op == op and report.cases == [ROWS]
    case = report.results["diffusers"].__pydantic_extra__["vs rl_kernel"][str(ROWS)]
    assert set(case.grads) == GRADS[op]
    (out,) = case.out
    assert out.numel == OUT_NUMEL.get(op, ROWS * HIDDEN) and out.repeatable is True
    if op == "gate_residual_norm_modulate" and not out.equal:
        # the gated residual is exact in both (one rounding of an exact product): only the
        # modulated half, index 1 of the stacked (S, 2, H) output, can differ
        assert out.first_differ[1] == 1
    if op == "timestep_sinusoid":
        # the CPU oracle evaluates diffusers' own sequence of FP32 ops: equal, and nothing to differentiate
        verdict = {(v.candidate, v.reference): v for v in bitwise_verdicts(report)}[("diffusers", "rl_kernel")]
        assert out.equal and verdict.verdict == "reusable"


def test_the_reference_of_the_fused_op_is_the_blocks_two_expressions():
    t = draw_inputs(get_op("gate_residual_norm_modulate"), 5, seed=3)
    stacked = get_candidate("gate_residual_norm_modulate", "diffusers").forward(t)
    h1 = get_candidate("gate_residual", "diffusers").forward({k: t[k] for k in ("res", "y", "gate", "idx")})
    norm = {"x": h1, "w": t["w"], "sh": t["sh"], "sc": t["sc"], "idx": t["idx"]}
    assert stacked.shape == (5, 2, HIDDEN)
    assert torch.equal(stacked[:, 0], h1)
    # norm2 and norm1 are both nn.RMSNorm(H, 1e-5): the msa expression on the same tensors gives the mlp one's bits
    assert torch.equal(stacked[:, 1], diffusers_adapter.norm_modulate(norm))


def test_final_adaln_out_indexes_timesteps():
    t = draw_inputs(get_op("final_adaln_out"), 64, seed=3)
    assert t["idx"].min() >= 0 and t["idx"].max() == TIMESTEPS - 1 and t["temb"].shape[0] == TIMESTEPS


# final_adaln_out's rl_kernel on the CPU is the GEMM oracle's split-K projection, about 0.3 s a call:
# the quick prior-art plan's few hundred calls would take minutes, so its plan runs with diffusers
# alone (rl_kernel's parts are batch-invariant on their own ops' checks)
PRIOR_ART = {op: ("diffusers", "rl_kernel") for op in GRADS} | {"final_adaln_out": ("diffusers",)}


@pytest.mark.parametrize("op", sorted(GRADS))
def test_prior_art_quick_references_batch_invariant(tmp_path, op):
    picked = [arg for name in PRIOR_ART[op] for arg in ("--candidate", name)]
    done = audit_in_process(
        "prior-art", "--op", op, "--device", "cpu", "--quick", *picked, "--out", str(tmp_path), "-q"
    )
    assert done.returncode == 0, done.stderr
    report = load_report(tmp_path / f"h3_prior_art.{op}.json").root
    found = {v.candidate: v.verdict for v in prior_art_verdicts(report)}
    assert {name: found.get(name) for name in PRIOR_ART[op]} == dict.fromkeys(PRIOR_ART[op], "batch-invariant")
    # the engines' candidates cannot run on a CPU: they are reported unavailable, not left out
    assert all(found[name] == "unavailable" for name in found.keys() - set(PRIOR_ART[op]))
    plain = report.timing.modes["plain"]  # the checks' time, apart from their inputs and comparisons
    assert abs(plain.unaccounted) <= 0.05 * plain.wall, plain
    assert all(plain.phases[p] > 0 for p in ("inputs", "compute", "comparison")), plain
