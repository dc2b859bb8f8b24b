"""``audit chain``: the replay of diffusers' MiniMax-H3 conditioning chain, on the CPU.

The decomposition test runs the real ``MiniMaxH3Transformer3DModel`` at hidden size 5376 (one block,
two heads, a small ffn); the other replays use a reduced block so that the module stays fast on two
cores. The planted candidates are test doubles (``tests/plugins/chain_planted.py`` and
``tests/plugins/flaky.py``), registered for the tests that use them only."""

import json
import sys
from contextlib import contextmanager

import pytest
import torch
from tests.helpers import audit_in_process
from typer.testing import CliRunner

import rl_kernel_ops
from audit.cli import app
from audit.core import candidates, chain
from audit.core.compare import count_differ
from modes import MODES
from reports.io import load_report
from reports.chain import ChainReplay, ChainStage

PLANTED = {"AUDIT_PLUGINS": "tests.plugins.chain_planted,tests.plugins.flaky"}
SMALL = chain.BlockConfig(hidden=256, heads=2, ffn=128, time_hidden=512, time_embed=256)
CPU = torch.device("cpu")


def _model_inputs(inputs: chain.ChainInputs, model) -> dict:
    """Inputs of MiniMaxH3Transformer3DModel.forward for the packed layout of ``inputs``."""
    tags = inputs.token_tags
    rows = {m: (tags == m).nonzero().flatten() for m in range(3)}
    cfg = model.config

    def draw(salt, n, width):
        return chain.seeded_normal(7, salt, (1, n, width), torch.float32)

    return dict(
        hidden_states=draw(1, len(rows[0]), cfg.in_channels * 4),
        audio_hidden_states=draw(2, len(rows[2]), cfg.audio_in_channels),
        encoder_hidden_states=draw(3, len(rows[1]), cfg.text_dim),
        timestep=inputs.timestep,
        timestep_indices=inputs.timestep_indices,
        token_tags=tags,
        position_ids=inputs.position_ids,
        video_indices=rows[0],
        audio_indices=rows[2],
        text_indices=rows[1],
    )


def test_provider_stages_in_sequence_are_bitwise_the_real_model_at_hidden_5376():
    config = chain.BlockConfig(heads=2, ffn=256)
    model = chain.build_model(config, CPU)
    inputs = chain.draw_inputs(config, 11)
    seen = {}
    model.time_embedder.register_forward_hook(lambda m, a, out: seen.update(temb=out))
    model.transformer_blocks[0].register_forward_hook(
        lambda m, a, out: seen.update(block_in=a[0], rotary=a[3], block=out)
    )
    model.norm_out.register_forward_hook(lambda m, a, out: seen.update(norm_out=out))
    with torch.no_grad():
        model(**_model_inputs(inputs, model))
    side = chain.make_side(model, inputs, CPU, grad=False)
    run = chain.replay(side, [s.provider for s in chain.STAGES], {"timestep": inputs.timestep, "h0": seen["block_in"]})
    assert run.values["h0"].shape == (1, 11, 5376) and run.values["out"].dtype == torch.bfloat16
    for ours, theirs in (
        (side.rotary[0], seen["rotary"][0]),
        (side.rotary[1], seen["rotary"][1]),
        (run.values["temb"], seen["temb"]),
        (run.values["h2"], seen["block"]),
        (run.values["out"], seen["norm_out"]),
    ):
        assert ours.shape == theirs.shape and count_differ(ours, theirs) == 0
    assert run.values["h2"].abs().max() > 0 and count_differ(run.values["h2"], run.values["h0"]) > 0


class _NormScaleShift(torch.nn.Module):
    """A module of this test's own: ``norm(x) * scale + shift``."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.RMSNorm(8, eps=1e-5)

    def forward(self, x, scale, shift):
        return self.norm(x) * scale + shift


def test_an_expression_is_forwards_own_operations_bitwise_and_names_what_it_lacks():
    module = _NormScaleShift().to(torch.bfloat16)
    x, scale, shift = (chain.seeded_normal(3, salt, (5, 8), torch.bfloat16) for salt in (1, 2, 3))
    w = chain.seeded_normal(3, 4, (8,), torch.bfloat16).requires_grad_()
    reads = {"x": chain.argument("x"), "sc": chain.argument("scale"), "sh": chain.argument("shift")}
    tensors = {"x": x, "sc": scale, "sh": shift, "w": w}
    whole = chain.Expression("whole", reads, chain.RESULT, {"w": "norm.weight"})
    got = chain.run_expression(module, whole, tensors)
    want = torch.func.functional_call(module, {"norm.weight": w}, (x, scale, shift))
    assert count_differ(got, want) == 0
    (got_dw,), (want_dw,) = torch.autograd.grad(got.sum(), [w]), torch.autograd.grad(want.sum(), [w])
    assert count_differ(got_dw, want_dw) == 0 and got_dw.abs().sum() > 0

    normed = module.norm(x)
    after_norm = chain.Expression("after norm", {**reads, "normed": chain.returned_by("norm")}, chain.RESULT)
    assert (
        count_differ(chain.run_expression(module, after_norm, tensors | {"normed": normed}), normed * scale + shift)
        == 0
    )

    without_shift = chain.Expression("without shift", {"x": reads["x"], "sc": reads["sc"]}, chain.RESULT)
    with pytest.raises(LookupError, match="_NormScaleShift.forward computes without shift from its argument shift"):
        chain.run_expression(module, without_shift, tensors)
    no_attn = chain.Expression("into attn", reads, chain.passed_to("attn"))
    with pytest.raises(LookupError, match=r"_NormScaleShift.forward has no attn\(\.\.\.\)"):
        chain.run_expression(module, no_attn, tensors)


@pytest.fixture
def planted(monkeypatch):
    """The planted candidates, registered in this process for one test only: the registry is
    restored afterwards, since other modules' runs start workers that would not know them."""
    modules = PLANTED["AUDIT_PLUGINS"].split(",")
    monkeypatch.setattr(candidates, "_REGISTRY", dict(candidates._REGISTRY))
    monkeypatch.setenv("AUDIT_PLUGINS", PLANTED["AUDIT_PLUGINS"])
    for name in modules:
        sys.modules.pop(name, None)  # imported afresh, they register into this test's registry
    yield
    for name in modules:
        sys.modules.pop(name, None)


def _replay(items: list[str], backward: bool, length: int = 6, **golden) -> ChainReplay:
    found = []
    choices = chain.parse_candidates(items, MODES)
    chain.run_chain(SMALL, [length], choices, "plain", CPU, backward, lambda event, **f: found.append(f), **golden)
    data = found[-1]["data"]
    return ChainReplay.model_validate(
        {**data, **ChainReplay.summary([ChainStage.model_validate(s) for s in data["stages"]])}
    )


def test_the_provider_at_every_stage_is_a_drop_in_forward_and_backward():
    replay = _replay(["all=provider"], backward=True)
    assert replay.drop_in.forward and replay.drop_in.backward
    assert (replay.first_drift, replay.first_isolated_drift, replay.first_grad_drift) == (None, None, None)
    assert all(s.chained_vs_provider.repeatable for s in replay.stages)
    assert all(0 < s.provider_vs_golden < 0.05 for s in replay.stages[2:])  # BF16 stages are off FP64, but close


def test_a_one_ulp_change_in_one_stage_moves_the_first_drift_there_and_flags_nothing_earlier(planted):
    replay = _replay(["all=provider", "gate_residual_msa=one_ulp_off"], backward=True)
    names = [s.stage for s in replay.stages]
    at = names.index("gate_residual_msa")
    assert replay.first_drift == replay.first_isolated_drift == "gate_residual_msa"
    stage = replay.stages[at]
    for cmp in (stage.chained_vs_provider, stage.isolated_vs_provider):
        assert cmp.differ == 1 and cmp.ulp_max == 1 and cmp.first_differ == [0, 0, 0] and cmp.repeatable
    for s in replay.stages[:at]:
        assert s.chained_vs_provider.equal and s.isolated_vs_provider.equal
    for s in replay.stages[at + 1 :]:  # the provider's own stages, fed the provider's inputs, agree
        assert s.isolated_vs_provider.equal
    assert not replay.drop_in.forward and not replay.drop_in.backward
    # the planted stage passes gradients through, so the backward drift starts where the forward one ends
    assert replay.first_grad_drift == "norm_out"


def test_a_nondeterministic_candidate_is_marked_not_repeatable_and_not_drifting(planted):
    replay = _replay(["all=provider", "gate_residual_mlp=flaky_ulp"], backward=False)
    flaky = next(s for s in replay.stages if s.stage == "gate_residual_mlp")
    assert not flaky.chained_vs_provider.equal and flaky.chained_vs_provider.repeatable is False
    assert flaky.isolated_vs_provider.repeatable is False and flaky.isolated_vs_provider.repeat_differ == 2
    assert replay.first_drift is None and replay.first_isolated_drift is None
    assert not replay.drop_in.forward and replay.drop_in.backward is None


def test_a_gradient_that_changes_between_backward_runs_is_marked_not_repeatable_not_drifting(planted):
    """flaky_gate_grad moves one ULP of d_gate, at another element each call, as an atomics-ordered
    sum would (diffusers' index_select backward on CUDA): the report must say nondeterministic."""
    replay = _replay(["all=provider", "gate_residual_msa=flaky_gate_grad"], backward=True)
    gate = next(s for s in replay.stages if s.stage == "gate_residual_msa")
    assert gate.grads["gate_msa"].repeatable is False and gate.grads["gate_msa"].repeat_differ == 2
    assert gate.grads["h0"].equal and gate.grads["attn"].equal  # d_res and d_y do not read d_gate
    assert replay.drop_in.forward and not replay.drop_in.backward
    assert replay.first_grad_drift is None and replay.first_drift is None


PAIR = "gate_residual_msa+norm2_modulate"


def _one_replay(items: list[str], calls: list) -> chain.Run:
    """One forward and backward replay of the candidate chain that ``items`` choose (SMALL, length 6)."""
    chosen = chain.resolve(chain.parse_candidates(items, MODES), "plain", CPU, backward=True)
    inputs = chain.draw_inputs(SMALL, 6)
    side = chain.make_side(chain.build_model(SMALL, CPU), inputs, CPU, grad=True)
    start = {"timestep": inputs.timestep, "h0": inputs.hidden}
    calls.clear()
    return chain.replay(side, [chosen[st.name].impl for st in chain.STAGES], start, inputs.grad_out)


def test_one_fused_rl_kernel_call_gives_the_two_stage_chains_bits_forward_and_backward(monkeypatch):
    """rl_kernel's CPU oracle of gate_residual_norm_modulate is its gate_residual then its
    norm_modulate: called once for both stages, it must give every value and every gradient of
    the chain with those two candidates in the two stages (h1's as its sum over both readers)."""
    calls = []
    fused_op = rl_kernel_ops.gate_residual_norm_modulate
    monkeypatch.setattr(rl_kernel_ops, "gate_residual_norm_modulate", lambda *a: calls.append(1) or fused_op(*a))
    fused = _one_replay(["all=provider", f"{PAIR}=rl_kernel"], calls)
    assert len(calls) == 1
    two = _one_replay(["all=provider", "gate_residual_msa=rl_kernel", "norm2_modulate=rl_kernel"], calls)
    assert not calls
    assert fused.values.keys() == two.values.keys() and fused.grads.keys() == two.grads.keys()
    assert all(count_differ(fused.values[k], two.values[k]) == 0 for k in two.values)
    assert all(count_differ(fused.grads[k], two.grads[k]) == 0 for k in two.grads)
    assert fused.grads["h1"].abs().sum() > 0


def test_the_fused_rl_kernel_pair_keeps_the_providers_forward_and_repeats_its_gradients():
    replay = _replay(["all=provider", f"{PAIR}=rl_kernel"], backward=True)
    stages = {s.stage: s for s in replay.stages}
    for name in ("gate_residual_msa", "norm2_modulate"):
        assert stages[name].candidate.name == "rl_kernel" and stages[name].candidate.serves == list(PAIR.split("+"))
    assert stages["norm1_modulate"].candidate.name == "provider" and stages["norm1_modulate"].candidate.serves is None
    assert replay.drop_in.forward and replay.first_drift is None and replay.first_isolated_drift is None
    assert all(s.isolated_vs_provider.equal for s in replay.stages)
    assert all(c.repeatable for s in replay.stages for c in s.grads.values())


def test_a_fused_call_one_ulp_off_in_n2_only_drifts_from_norm2_modulate_chained_and_isolated(planted):
    replay = _replay(["all=provider", f"{PAIR}=n2_one_ulp_off"], backward=False)
    assert replay.first_drift == replay.first_isolated_drift == "norm2_modulate"
    stages = {s.stage: s for s in replay.stages}
    gate, norm2 = stages["gate_residual_msa"], stages["norm2_modulate"]
    assert gate.chained_vs_provider.equal and gate.isolated_vs_provider.equal
    for cmp in (norm2.chained_vs_provider, norm2.isolated_vs_provider):
        assert cmp.differ == 1 and cmp.ulp_max == 1 and cmp.first_differ == [0, 0, 0] and cmp.repeatable
    assert gate.candidate.name == norm2.candidate.name == "n2_one_ulp_off"


def test_a_fused_candidate_that_cannot_run_here_leaves_the_provider_in_both_stages_with_the_reason():
    chosen = chain.resolve(chain.parse_candidates([f"{PAIR}=sglang_fused_residual"], MODES), "plain", CPU, True)
    for name in PAIR.split("+"):
        assert chosen[name].impl is chain.STAGE_BY_NAME[name].provider
        assert "sglang_fused_residual gives no gradient for res, y, gate, w" in chosen[name].entry["unavailable"]


@pytest.mark.parametrize(
    "given, says",
    [
        ([f"{PAIR}=nope"], "no candidate 'nope' for gate_residual_norm_modulate"),
        ([f"{PAIR}=rl_kernel[nomode]"], "the mode in NAME[MODE] must be one of"),
        (["norm2_modulate+gate_residual_msa=rl_kernel"], f"the one pair is {PAIR}"),
        (["norm1_modulate+attention=rl_kernel"], f"the one pair is {PAIR}"),
        ([f"{PAIR}=rl_kernel", "norm2_modulate=provider"], "and norm2_modulate=provider: one call serves both"),
        (["gate_residual_msa=rl_kernel", f"{PAIR}=rl_kernel"], "and gate_residual_msa=rl_kernel: one call serves"),
    ],
)
@pytest.mark.parametrize("command", ["chain", "trajectory"])
def test_a_bad_fused_pair_is_one_line_and_status_2_before_anything_runs(command, given, says, tmp_path):
    out = tmp_path / "x.json"
    items = [arg for item in given for arg in ("--candidate", item)]
    done = CliRunner().invoke(app, [command, "--device", "cpu", *items, "--out", str(out)])
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error")]
    assert done.exit_code == 2 and len(errors) == 1 and says in errors[0], done.output
    assert not out.exists()


@contextmanager
def _no_fp64():
    raise RuntimeError("planted: no FP64 kernel under this mode")
    yield


def test_a_failing_fp64_chain_leaves_the_bitwise_replay_standing():
    replay = _replay(["all=provider"], backward=False, length=4, golden_context=_no_fp64)
    assert "planted: no FP64 kernel" in replay.golden_unavailable
    assert all(s.chained_vs_golden is None and s.provider_vs_golden is None for s in replay.stages)
    assert replay.drop_in.forward


@pytest.fixture(scope="module")
def cli_report(tmp_path_factory):
    """One forward replay through the command line, in a mode process, with rl_kernel wherever it
    exists, liger (unavailable on a CPU) asked for at norm1_modulate, and a mode that cannot run."""
    out = tmp_path_factory.mktemp("chain") / "chain.json"
    done = audit_in_process(
        *(
            "chain --device cpu --hidden 256 --heads 2 --ffn 128 --length 5 "
            "--candidate norm1_modulate=liger --mode plain --mode vllm"
        ).split(),
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    return out, done.stdout


def test_the_report_validates_renders_and_marks_what_could_not_run(cli_report, tmp_path):
    out, printed = cli_report
    assert audit_in_process("validate", str(out)).returncode == 0
    report = load_report(out).root
    assert report.kind == "h3_conditioning_chain_replay" and report.candidates["timestep_mlp"] == "rl_kernel"
    assert "cannot be switched on" in report.results["vllm"].unavailable
    replay = report.results["plain"].lengths["5"]
    stages = {s.stage: s for s in replay.stages}
    assert "needs a CUDA device" in stages["norm1_modulate"].candidate.unavailable
    assert stages["norm2_modulate"].candidate.name == "rl_kernel"
    assert stages["attention"].candidate.name == "provider"
    assert replay.first_drift in stages and "first drift" in printed
    markdown = audit_in_process("show", "-f", "markdown", str(out)).stdout
    assert f"▶ {replay.first_drift}" in markdown
    assert audit_in_process("plot", str(out), "--out", str(tmp_path / "chain.png")).returncode == 0
    assert (tmp_path / "chain.png").stat().st_size > 0
    same = audit_in_process("diff", str(out), str(out))
    assert same.returncode == 0 and "0 regressions" in same.stdout


def test_a_report_whose_first_drift_disagrees_with_its_stages_is_invalid(cli_report, tmp_path):
    data = json.loads(cli_report[0].read_text())
    data["results"]["plain"]["lengths"]["5"]["first_drift"] = "attention"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    done = audit_in_process("validate", str(bad))
    assert done.returncode == 1 and "first_drift" in done.stderr


@pytest.mark.parametrize(
    "given, says",
    [
        ("attention=rl_kernel", "no registry op serves attention"),
        ("norm1_modulate=nope", "no candidate 'nope'"),
        ("block=rl_kernel", "unknown stage 'block'"),
    ],
)
def test_a_bad_candidate_exits_2_before_anything_runs(given, says, tmp_path):
    done = audit_in_process("chain", "--device", "cpu", "--candidate", given, "--out", str(tmp_path / "x.json"))
    assert done.returncode == 2 and says in done.stderr and not (tmp_path / "x.json").exists()
