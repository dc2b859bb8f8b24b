"""``audit diff`` and the baseline gate: exit 0 without a regression, 1 with one, 2 on unusable input."""

import copy
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from audit.cli import app
from tests.helpers import REPO, SEEDS, load
from reports.changes import classify
from reports.diff import diff_sets, gate
from reports.io import load_report, load_set, parse_report
from reports.schema import Cmp

H200 = REPO / "docs" / "evidence" / "h200"
runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "250"})


def _seed(name):
    return next(p for p in SEEDS if p.name == name)


def _write(tmp_path: Path, name: str, data: dict) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.name)
def test_a_report_against_itself_exits_0(path):
    r = invoke("diff", str(path), str(path))
    assert r.exit_code == 0, r.output
    assert "0 regressions" in r.output


def _mirrors(data: dict, name: str, ref: str) -> list[dict]:
    """The cases of NAME vs REF and of its mirror REF vs NAME: a report changes both or is invalid."""
    return [data["results"][name][f"vs {ref}"], data["results"][ref][f"vs {name}"]]


def test_one_equal_tensor_turned_into_differ_exits_1_and_names_it(tmp_path):
    data = copy.deepcopy(load(_seed("h3_bitwise_reuse.norm_modulate.json")))
    for cases in _mirrors(data, "diffusers", "rl_kernel"):
        cases["4097"]["out"][0].update(equal=False, differ=12, max_abs=0.5)
    new = _write(tmp_path, "new.json", data)
    r = invoke("diff", "--format", "markdown", str(_seed("h3_bitwise_reuse.norm_modulate.json")), str(new))
    assert r.exit_code == 1, r.output
    line = next(x for x in r.output.splitlines() if "regression |" in x)
    for field in ("diffusers", "rl_kernel", "| 4097 |", "| out |", "equal", "12/22,025,472 differ"):
        assert field in line
    assert "norm_modulate" in r.output


def test_a_candidate_that_became_unavailable_is_a_regression(tmp_path):
    data = copy.deepcopy(load(_seed("h3_bitwise_reuse.norm_modulate.json")))
    data["results"]["liger"] = {"unavailable": "liger_kernel is not installed"}
    r = invoke("diff", str(_seed("h3_bitwise_reuse.norm_modulate.json")), str(_write(tmp_path, "n.json", data)))
    assert r.exit_code == 1 and "liger_kernel is not installed" in r.output


def test_count_changes_on_non_repeatable_comparisons_are_noise_not_regressions():
    old = Cmp(equal=False, differ=35314, numel=48384, max_abs=0.5, repeatable=False, repeat_differ=30000)
    new = Cmp(equal=False, differ=35225, numel=48384, max_abs=0.5, repeatable=False, repeat_differ=30100)
    assert classify(old, new) == "noise"
    equal_by_luck = Cmp(equal=True, differ=0, numel=48384, max_abs=0.0, repeatable=False, repeat_differ=1)
    assert classify(equal_by_luck, new) == "noise"
    stable = Cmp(equal=True, differ=0, numel=48384, max_abs=0.0, repeatable=True)
    assert classify(stable, new) == "regression"  # it became nondeterministic
    assert classify(stable, Cmp(equal=False, differ=3, numel=48384, max_abs=0.1, repeatable=True)) == "regression"
    unknown = Cmp(equal=False, differ=10, numel=48384, max_abs=0.1)
    assert classify(unknown, Cmp(equal=False, differ=11, numel=48384, max_abs=0.1)) == "change"


def test_b200_example_against_the_committed_h200_report_shows_the_environment():
    r = invoke(
        "diff", str(_seed("h3_bitwise_reuse.gate_residual.json")), str(H200 / "h3_bitwise_reuse.gate_residual.json")
    )
    assert r.exit_code in (0, 1), r.output
    for text in ("NVIDIA B200", "NVIDIA H200", "torch", "2.13.0+cu130", "2.11.0+cu130", "libraries.liger-kernel"):
        assert text in r.output
    assert "repeatability unknown in OLD" in r.output


def test_unusable_input_exits_2(tmp_path):
    prior = _seed("h3_prior_art.adaln_projection.json")
    bitwise = _seed("h3_bitwise_reuse.adaln_projection.json")
    assert invoke("diff", str(bitwise), str(prior)).exit_code == 2  # kinds differ
    junk = _write(tmp_path, "junk.json", {"kind": "h3_bitwise_reuse"})
    assert invoke("diff", str(junk), str(bitwise)).exit_code == 2  # not a report
    assert invoke("diff", str(tmp_path / "missing"), str(bitwise)).exit_code == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    assert invoke("diff", str(empty), str(bitwise)).exit_code == 2


def test_directories_are_matched_by_op_and_other_json_is_left_out(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir(), new.mkdir()
    for p in SEEDS:
        (old / p.name).write_text(p.read_text())
    (new / "bench.json").write_text(json.dumps({"benchmark": "x"}))
    (new / "gate.json").write_text(_seed("h3_bitwise_reuse.gate_residual.json").read_text())
    d = diff_sets(load_set(old), load_set(new))
    assert [o.op for o in d.ops] == ["gate_residual"] and len(d.only_old) == 4 and not d.only_new


def test_prior_art_invariant_to_not_invariant_is_a_regression_and_latency_ratios_are_shown(tmp_path):
    data = copy.deepcopy(load(_seed("h3_prior_art.adaln_projection.json")))
    entry = data["results"]["plain"]["rl_kernel"]
    entry["batch_invariance"]["batch_size_sweep"]["differ"] = 1
    entry["batch_invariance"]["batch_invariant"] = False
    for acc in entry["accuracy_latency"].values():
        acc["fwd_us"] *= 2
    r = invoke("diff", str(_seed("h3_prior_art.adaln_projection.json")), str(_write(tmp_path, "p.json", data)))
    assert r.exit_code == 1, r.output
    assert "batch-invariant" in r.output and "not invariant" in r.output and "2.00×" in r.output


def test_gate_fails_on_regression_and_on_differ(tmp_path):
    seed = _seed("h3_bitwise_reuse.gate_residual.json")
    report = load_report(seed)
    baseline = load_set(seed)
    diff, failed = gate([report], [seed], baseline, "regression")
    assert not failed and diff.count("regression") == 0
    assert gate([report], [seed], None, "none")[1] == []
    assert gate([report], [seed], None, "differ")[1] == ["h3_bitwise_reuse gate_residual: a comparison differs"]
    data = copy.deepcopy(load(seed))
    for cases in _mirrors(data, "diffusers", "rl_kernel"):
        for c in cases.values():
            c["grads"]["gate"].update(equal=True, differ=0, max_abs=0.0)
    clean = parse_report(data)
    assert gate([clean], [seed], None, "differ")[1] == []
    # the clean report as the baseline: today's differences are regressions against it
    clean_path = _write(tmp_path, "clean.json", data)
    diff, failed = gate([report], [seed], load_set(clean_path), "regression")
    assert failed and diff.count("regression") == 3


def test_run_checks_the_baseline_before_computing(tmp_path):
    r = invoke("run", "--op", "gate_residual", "--case", "1", "--baseline", str(tmp_path / "none"))
    assert r.exit_code == 2 and "--baseline" in r.output
    r = invoke(
        "run", "--op", "gate_residual", "--case", "1", "--baseline", str(_seed("h3_bitwise_reuse.norm_modulate.json"))
    )
    assert r.exit_code == 2 and "no h3_bitwise_reuse report for gate_residual" in r.output
    r = invoke("run", "--op", "gate_residual", "--case", "1", "--fail-on", "regression")
    assert r.exit_code == 2 and "needs --baseline" in r.output
    r = invoke("prior-art", "--op", "norm_modulate", "--baseline", str(_seed("h3_prior_art.adaln_projection.json")))
    assert r.exit_code == 2


def test_a_run_against_a_baseline_exits_1_on_a_regression_and_prints_the_diff(tmp_path):
    """End to end: the B200 example, with dgate at 257 rows edited to equal, as the baseline of a
    real CPU run whose dgate differs at 257 rows."""
    from tests.helpers import audit

    data = copy.deepcopy(load(_seed("h3_bitwise_reuse.gate_residual.json")))
    for cases in _mirrors(data, "diffusers", "rl_kernel"):
        cases["257"]["grads"]["gate"].update(equal=True, differ=0, max_abs=0.0)
    baseline = _write(tmp_path, "baseline.json", data)
    out = tmp_path / "run.json"
    done = audit(
        *"run --op gate_residual --device cpu --case 257 --candidate diffusers".split(),
        "--out",
        str(out),
        "-q",
        "--baseline",
        str(baseline),
        "--allow-missing",
        "all",  # the cases this run leaves out
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert load_report(out).root.cases == [257]  # the report is written before the gate decides
    assert "regression" in done.stdout and "dgate" in done.stdout and "NVIDIA B200" in done.stdout
    assert "3 lost (3 allowed by --allow-missing)" in done.stdout
    assert "--fail-on regression: against" in done.stderr and "1 regression," in done.stderr
