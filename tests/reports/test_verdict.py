"""Verdicts are a pure function of a report: checked on every example report, with the verdicts a
reader of the gate_residual, norm_modulate and prior-art examples would write by hand."""

import copy

import pytest

from tests.helpers import SEEDS, load
from reports.io import load_report, parse_report
from reports.bitwise import verdicts as bitwise_verdicts
from reports.kinds import kind_of
from reports.prior_art import verdicts as prior_art_verdicts


def _by_pair(report):
    return {(v.candidate, v.reference): v.verdict for v in bitwise_verdicts(report.root)}


def _seed(name):
    return next(p for p in SEEDS if p.name == name)


def test_gate_residual_example_by_hand():
    # out, dres, dy equal in every case; dgate equal at 1 row, differs from 257 rows on
    assert _by_pair(load_report(_seed("h3_bitwise_reuse.gate_residual.json"))) == {
        ("diffusers", "rl_kernel"): "forward only",
    }
    [v] = bitwise_verdicts(load_report(_seed("h3_bitwise_reuse.gate_residual.json")).root)
    assert "dgate from case 257" in v.detail


def test_norm_modulate_example_by_hand():
    assert _by_pair(load_report(_seed("h3_bitwise_reuse.norm_modulate.json"))) == {
        ("diffusers", "rl_kernel"): "forward only",  # output equal everywhere, dx/dw/dsh/dsc not
        ("liger", "diffusers"): "differs",
        ("liger", "rl_kernel"): "differs",
        ("liger_rlk_gather", "diffusers"): "differs",
        ("liger_rlk_gather", "rl_kernel"): "differs",
        ("sglang", "diffusers"): "differs",
        ("sglang", "rl_kernel"): "differs",
        ("torch_rms_norm", "diffusers"): "differs",  # unmodulated output
        ("torch_rms_norm", "rl_kernel"): "differs",
        ("transformer_engine", "diffusers"): "differs",
        ("transformer_engine", "rl_kernel"): "differs",
    }


def test_prior_art_example_by_hand():
    found = {
        (v.mode, v.candidate): v
        for v in prior_art_verdicts(load_report(_seed("h3_prior_art.adaln_projection.json")).root)
    }
    assert {k: v.verdict for k, v in found.items()} == {
        ("plain", "diffusers[plain]"): "not invariant",
        ("plain", "rl_kernel"): "batch-invariant",
        ("vllm", "diffusers[vllm]"): "batch-invariant",
        ("sglang", "diffusers[sglang]"): "batch-invariant",
        ("sglang_ieee", "diffusers[sglang_ieee]"): "batch-invariant",
        ("megatron_te_native", "diffusers[megatron_te_native]"): "not invariant",
        ("megatron_triton", "diffusers[megatron_triton]"): "batch-invariant",
        ("megatron_triton_ieee", "diffusers[megatron_triton_ieee]"): "batch-invariant",
    }
    te = found[("megatron_te_native", "diffusers[megatron_te_native]")].detail
    assert "row gradients" in te and "output" not in te  # only the row gradients break


@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.name)
def test_every_pair_once_and_reusable_exactly_when_all_equal(path):
    report = load_report(path)
    found = kind_of(report).verdicts(report.root)
    if report.root.kind == "h3_prior_art":
        for v in found:
            if v.verdict != "unavailable":
                c = report.root.results[v.mode][v.candidate]
                assert (v.verdict == "batch-invariant") == c.batch_invariance.batch_invariant
        return
    pairs = [frozenset((v.candidate, v.reference)) for v in found if v.reference]
    assert len(pairs) == len(set(pairs))
    for v in found:
        if v.reference is None:
            continue
        cases = report.root.results[v.candidate].__pydantic_extra__[f"vs {v.reference}"]
        all_equal = all(c.equal for case in cases.values() for c in [*case.out, *case.grads.values()])
        assert (v.verdict == "reusable") == all_equal


def _gate_residual_with(mutate):
    """The B200 gate_residual example with ``mutate`` applied to diffusers vs rl_kernel and to its
    mirror, rl_kernel vs diffusers (a report whose mirrors disagree is invalid)."""
    data = copy.deepcopy(load(_seed("h3_bitwise_reuse.gate_residual.json")))
    mutate(data["results"]["diffusers"]["vs rl_kernel"])
    mutate(data["results"]["rl_kernel"]["vs diffusers"])
    return parse_report(data)


def _equal(cmp):
    cmp.update(equal=True, differ=0, max_abs=0.0)


def test_all_equal_is_reusable_and_repeatability_is_stated():
    report = _gate_residual_with(lambda vs: [_equal(c["grads"]["gate"]) for c in vs.values()])
    [v] = bitwise_verdicts(report.root)
    assert v.verdict == "reusable" and "repeatability not checked" in v.detail
    assert not kind_of(report).any_difference(report.root)


def test_a_non_repeatable_gradient_makes_the_verdict_nondeterministic():
    def mutate(vs):
        for c in vs.values():
            c["grads"]["gate"] |= {"repeatable": False, "repeat_differ": 7} if c["grads"]["gate"]["differ"] else {}

    [v] = bitwise_verdicts(_gate_residual_with(mutate).root)
    assert v.verdict == "nondeterministic" and v.detail.startswith("dgate not repeatable (up to 7 elements")


def test_a_stable_output_difference_is_differs_with_the_smallest_case():
    def mutate(vs):
        vs["4097"]["out"][0].update(equal=False, differ=3, max_abs=1.0)
        vs["32768"]["out"][0].update(equal=False, differ=5, max_abs=1.0)

    [v] = bitwise_verdicts(_gate_residual_with(mutate).root)
    assert v.verdict == "differs" and v.detail.startswith("out from case 4097, dgate from case 257")
    differs = _gate_residual_with(mutate)
    assert kind_of(differs).any_difference(differs.root)


def test_a_missing_case_keeps_an_otherwise_equal_candidate_from_being_reusable():
    def mutate(vs):
        for c in vs.values():
            _equal(c["grads"]["gate"])
        vs["32768"] = {"unavailable": "OutOfMemoryError: planted"}

    [v] = bitwise_verdicts(_gate_residual_with(mutate).root)
    assert v.verdict == "unavailable" and "case 32768 unavailable: OutOfMemoryError: planted" in v.detail


def test_differs_still_names_the_tensors_that_are_not_repeatable():
    def mutate(vs):
        vs["257"]["out"][0].update(equal=False, differ=3, max_abs=1.0)
        vs["257"]["grads"]["gate"] |= {"repeatable": False, "repeat_differ": 9}

    [v] = bitwise_verdicts(_gate_residual_with(mutate).root)
    assert v.verdict == "differs" and v.detail == "out from case 257, dgate from case 4097; not repeatable: dgate"


def test_an_engine_kernel_with_no_backward_is_forward_only_even_with_every_output_equal():
    from tests.helpers import REPO

    engines = REPO / "docs" / "evidence" / "h200" / "engines"
    report = load_report(engines / "h3_bitwise_reuse.gate_residual.json").root
    by_pair = {(v.candidate, v.reference): v for v in bitwise_verdicts(report)}
    for ref in ("diffusers", "rl_kernel"):
        engine = by_pair[("sglang_indexed_gate", ref)]
        assert engine.verdict == "forward only" and engine.detail.endswith("no backward: no gradient to compare")
        assert "out bitwise equal in cases 1, 257, 4097, 32768, repeatable" in engine.detail
    # an op without gradients at all: equal outputs are reusable
    sinusoid = load_report(engines / "h3_bitwise_reuse.timestep_sinusoid.json").root
    assert {v.verdict for v in bitwise_verdicts(sinusoid) if v.reference} == {"reusable"}


def test_a_verdict_over_many_cases_names_the_first_twelve_and_counts_the_rest():
    """Case 1 of the gate_residual example is equal in every tensor, copied to 100 cases."""
    data = load(_seed("h3_bitwise_reuse.gate_residual.json"))
    one = data["results"]["diffusers"]["vs rl_kernel"]["1"]
    data["cases"] = list(range(1, 101))
    data["inputs_sha256"] = {}
    data["results"]["diffusers"]["vs rl_kernel"] = {str(c): one for c in data["cases"]}
    data["results"]["rl_kernel"]["vs diffusers"] = data["results"]["diffusers"]["vs rl_kernel"]
    [v] = bitwise_verdicts(parse_report(data).root)
    assert v.verdict == "reusable"
    assert "bitwise equal in cases 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 and 88 more" in v.detail
