"""``audit diff`` and the baseline gate: exit 0 without a regression, 1 with one, 2 on unusable input."""

import copy
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from audit.cli import app
from tests.helpers import REPO, SEEDS, load
from reports.changes import classify
from reports.diff import diff_sets, gate
from reports.kinds import kind_of
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
    [why] = gate([report], [seed], None, "differ")[1]  # dgate differs
    assert why.startswith("h3_bitwise_reuse gate_residual: diffusers vs rl_kernel: forward only (output equal")
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
    from tests.helpers import audit_in_process

    data = copy.deepcopy(load(_seed("h3_bitwise_reuse.gate_residual.json")))
    for cases in _mirrors(data, "diffusers", "rl_kernel"):
        cases["257"]["grads"]["gate"].update(equal=True, differ=0, max_abs=0.0)
    baseline = _write(tmp_path, "baseline.json", data)
    out = tmp_path / "run.json"
    done = audit_in_process(
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


# The classification table, cell by cell, on the H200 gate_residual report: the state of
# diffusers vs rl_kernel at 257 rows (dgate; the other tensors stay equal), or that case
# unavailable, or absent (a run without it).
STATES = ["equal", "equal, not repeatable", "differs", "differs, not repeatable", "unavailable", "absent"]
EXPECTED = """
                          equal        equal-nr     differs      differs-nr   unavailable  absent
equal                     -            regression   regression   regression   regression   lost
equal, not repeatable     improvement  -            regression   noise        regression   lost
differs                   improvement  regression   change       regression   regression   lost
differs, not repeatable   improvement  noise        change       noise        regression   lost
unavailable               improvement  change       change       change       -            lost
absent                    -            -            -            -            -            -
"""  # the README's table; on the diagonal the count of differing elements changes


def _expected(old: str, new: str) -> str | None:
    row = next(r for r in EXPECTED.strip().splitlines()[1:] if r.startswith(old + "  "))
    cell = row[len(old) :].split()[STATES.index(new)]
    return None if cell == "-" else cell


def _without_case(data: dict, case: int) -> dict:
    """The H200 gate_residual report as a run without ``case`` would have written it (only diffusers
    vs rl_kernel compares cases there)."""
    data["cases"].remove(case)
    for found in (data["inputs_sha256"], *(r["kernels"] for r in data["results"].values() if "kernels" in r)):
        del found[str(case)]
    for cases in _mirrors(data, "diffusers", "rl_kernel"):
        del cases[str(case)]
    return data


def test_each_vanished_case_is_lost_with_its_own_old_state(tmp_path):
    """Case 1 of the H200 report is equal everywhere, case 32768 differs non-repeatably somewhere."""
    data = _without_case(_without_case(_h200("h3_bitwise_reuse.gate_residual.json"), 1), 32768)
    status, doc, _ = _lost(str(H200 / "h3_bitwise_reuse.gate_residual.json"), str(_write(tmp_path, "n.json", data)))
    assert status == 1
    assert [(x["what"], x["old"]) for x in doc["lost"]] == [
        ("case 1", "equal"),
        ("case 32768", "differs, not repeatable"),
    ]


def _in_state(state: str, differ: int) -> dict:
    data = copy.deepcopy(load(H200 / "h3_bitwise_reuse.gate_residual.json"))
    if state == "absent":
        return _without_case(data, 257)
    for cases in _mirrors(data, "diffusers", "rl_kernel"):
        if state == "unavailable":
            cases["257"] = {"unavailable": "OutOfMemoryError: planted"}
        else:
            equal = state.startswith("equal")
            cmp = {"equal": equal, "differ": 0 if equal else differ, "numel": 48384, "max_abs": 0.0 if equal else 0.5}
            repeatable = "not repeatable" not in state
            cmp |= {"repeatable": True} if repeatable else {"repeatable": False, "repeat_differ": 17}
            cases["257"]["grads"]["gate"] = cmp
    return data


@pytest.mark.parametrize("new", STATES)
@pytest.mark.parametrize("old", STATES)
def test_the_classification_follows_the_readme_table_cell_by_cell(tmp_path, old, new):
    d = diff_sets(
        load_set(_write(tmp_path, "old.json", _in_state(old, differ=100))),
        load_set(_write(tmp_path, "new.json", _in_state(new, differ=200))),
    )
    [op] = d.ops
    kinds = {c.kind for c in op.changes if c.case == "257"} | {x.kind for x in op.lost}
    expected = _expected(old, new)
    assert kinds == ({expected} if expected else set()), (op.changes, op.lost)
    assert d.regressed == (expected in ("regression", "lost"))


def test_the_readme_holds_the_table_the_test_checks():
    readme = (REPO / "README.md").read_text()
    rows = [r for r in readme.splitlines() if r.startswith("| **")]
    for old, row in zip(STATES, rows):
        cells = [c.strip().rstrip("¹") for c in row.strip("|").split("|")][1:]
        got = [None if c.startswith("—") else c for c in cells]
        assert got == [_expected(old, new) for new in STATES], row


def test_unknown_repeatability_next_to_not_repeatable_is_noise():
    unknown = Cmp(equal=True, differ=0, numel=8, max_abs=0.0)
    noisy = Cmp(equal=False, differ=3, numel=8, max_abs=0.1, repeatable=False, repeat_differ=2)
    assert classify(unknown, noisy) == classify(noisy, unknown) == "noise"
    stable_unknown = Cmp(equal=False, differ=3, numel=8, max_abs=0.1)
    assert classify(noisy, stable_unknown) is None  # the same bits: nothing changed


def _h200(name: str) -> dict:
    return copy.deepcopy(load(H200 / name))


def _lost(*args: str) -> tuple[int, dict, str]:
    """``audit diff ARGS`` twice: exit status, the JSON document, and the table."""
    as_json = invoke("diff", *args, "--format", "json")
    return as_json.exit_code, json.loads(as_json.stdout) if as_json.stdout else {}, invoke("diff", *args).output


def test_a_vanished_gradient_is_lost_and_named_in_table_markdown_and_json(tmp_path):
    """diffusers vs rl_kernel turned forward-only: every dgate comparison is gone."""
    data = _h200("h3_bitwise_reuse.gate_residual.json")
    for cases in _mirrors(data, "diffusers", "rl_kernel"):
        for case in cases.values():
            del case["grads"]["gate"]
    old, new = str(H200 / "h3_bitwise_reuse.gate_residual.json"), str(_write(tmp_path, "new.json", data))
    status, doc, table = _lost(old, new)
    assert status == 1 and doc["regressed"] is True and doc["counts"]["lost"] == 4
    assert [x["what"] for x in doc["lost"]] == [
        f"diffusers vs rl_kernel, case {c}: dgate" for c in (1, 257, 4097, 32768)
    ]
    assert "diffusers vs rl_kernel, case 257: dgate" in table and "4 lost" in table
    assert "case 257: dgate" in invoke("diff", "-f", "markdown", old, new).output
    allowed = invoke("diff", old, new, "--allow-missing", "dgate")
    assert allowed.exit_code == 0 and "4 lost (4 allowed by --allow-missing)" in allowed.output


def test_a_vanished_output_is_lost(tmp_path):
    data = _h200("h3_bitwise_reuse.gate_residual.json")
    for cases in _mirrors(data, "diffusers", "rl_kernel"):
        cases["4097"]["out"] = []
    status, doc, _ = _lost(str(H200 / "h3_bitwise_reuse.gate_residual.json"), str(_write(tmp_path, "n.json", data)))
    assert status == 1 and [x["what"] for x in doc["lost"]] == ["diffusers vs rl_kernel, case 4097: out"]


def test_a_vanished_case_fails_unless_allowed_by_name_or_all(tmp_path):
    """A loss alone fails the diff and the gate, each naming it and the --allow-missing that accepts
    it; that name does."""
    data = _without_case(_h200("h3_bitwise_reuse.gate_residual.json"), 32768)
    old, new = str(H200 / "h3_bitwise_reuse.gate_residual.json"), str(_write(tmp_path, "n.json", data))
    status, doc, table = _lost(old, new)
    assert status == 1 and [x["what"] for x in doc["lost"]] == ["case 32768"] and "case 32768" in table
    was = doc["lost"][0]["old"]
    named = f"h3_bitwise_reuse gate_residual: case 32768 lost (was {was}); --allow-missing 32768 accepts it"
    assert [line for line in table.splitlines() if line.startswith("exit 1")] == [f"exit 1: {named}"]
    _, [why] = gate([parse_report(data)], [Path(new)], load_set(Path(old)), "regression", baseline_name="old")
    assert why.startswith("against old: 0 regressions,") and why.endswith(f"; first: {named}")
    for allow in ([], ["--allow-missing", "32768"]):  # JUnit: the loss's case fails with that line, or passes
        invoke("diff", old, new, *allow, "--junit", str(tmp_path / "j.xml"))
        [case] = [c for c in ET.parse(tmp_path / "j.xml").iter("testcase") if c.get("name") == "case 32768"]
        assert [f.get("message") for f in case.iter("failure")] == ([] if allow else [named])
    assert invoke("diff", old, new, "--allow-missing", "4097").exit_code == 1
    assert invoke("diff", old, new, "--allow-missing", "32768").exit_code == 0
    assert invoke("diff", old, new, "--allow-missing", "all").exit_code == 0


def test_a_vanished_candidate_mode_and_report_are_lost(tmp_path):
    bitwise = _h200("h3_bitwise_reuse.norm_modulate.json")
    del bitwise["results"]["liger"]
    status, doc, _ = _lost(str(H200 / "h3_bitwise_reuse.norm_modulate.json"), str(_write(tmp_path, "b.json", bitwise)))
    assert status == 1 and [x["what"] for x in doc["lost"]] == ["candidate liger"]
    chain = _h200("chain/h3_conditioning_chain_replay.mode_sglang.json")
    del chain["results"]["sglang"]
    old = str(H200 / "chain" / "h3_conditioning_chain_replay.mode_sglang.json")
    status, doc, _ = _lost(old, str(_write(tmp_path, "c.json", chain)))
    assert status == 1 and [x["what"] for x in doc["lost"]] == ["mode sglang"]
    old_dir, new_dir = tmp_path / "old", tmp_path / "new"
    old_dir.mkdir(), new_dir.mkdir()
    for name in ("h3_bitwise_reuse.gate_residual.json", "h3_bitwise_reuse.timestep_mlp.json"):
        (old_dir / name).write_text((H200 / name).read_text())
    (new_dir / "g.json").write_text((H200 / "h3_bitwise_reuse.gate_residual.json").read_text())
    status, doc, table = _lost(str(old_dir), str(new_dir))
    assert status == 1 and doc["lost"][0]["report"] == "h3_bitwise_reuse timestep_mlp"
    assert invoke("diff", str(old_dir), str(new_dir), "--allow-missing", "timestep_mlp").exit_code == 0


def test_a_prior_art_candidate_that_lost_its_backward_is_lost(tmp_path):
    data = _h200("h3_prior_art.gate_residual.json")
    entry = data["results"]["plain"]["rl_kernel"]
    entry["has_backward"] = False
    status, doc, _ = _lost(str(H200 / "h3_prior_art.gate_residual.json"), str(_write(tmp_path, "p.json", data)))
    assert status == 1 and [x["what"] for x in doc["lost"]] == ["rl_kernel in mode plain: backward"]


def _without_backward(data: dict) -> dict:
    data["backward"] = False
    for mode in data["results"].values():
        for replay in mode["lengths"].values():
            for stage in replay["stages"]:
                del stage["grads"]
            replay["first_grad_drift"] = None
            replay["drop_in"]["backward"] = None
    return data


def test_chain_reports_of_different_problems_exit_2_naming_what_differs(tmp_path):
    old = H200 / "chain" / "h3_conditioning_chain_replay.liger.json"
    small = _h200("chain/h3_conditioning_chain_replay.liger.json")
    small["block"]["hidden"] = 256
    done = invoke("diff", str(old), str(_write(tmp_path, "small.json", small)))
    assert (
        done.exit_code == 2 and "block.hidden 5376 vs 256" in done.stderr and "--allow-different-problem" in done.stderr
    )
    other = invoke("diff", str(old), str(H200 / "chain" / "h3_conditioning_chain_replay.rl_kernel.json"))
    assert other.exit_code == 2 and 'candidates.norm1_modulate "liger" vs "rl_kernel"' in other.stderr
    forward = _write(
        tmp_path, "forward.json", _without_backward(_h200("chain/h3_conditioning_chain_replay.liger.json"))
    )
    done = invoke("diff", str(old), str(forward))
    assert done.exit_code == 2 and "backward true vs false" in done.stderr
    status, doc, table = _lost(str(old), str(forward), "--allow-different-problem")
    assert status == 1 and doc["counts"]["lost"] > 0 and "backward" in table
    assert all(x["what"].startswith("mode plain, length ") for x in doc["lost"])
    assert {x["what"].rpartition(": ")[2][0] for x in doc["lost"]} == {"d"}  # only gradients were lost


def test_a_case_drawn_from_other_inputs_is_a_different_problem_not_a_quiet_match(tmp_path):
    old = H200 / "h3_bitwise_reuse.gate_residual.json"
    data = _h200("h3_bitwise_reuse.gate_residual.json")
    drawn = data["inputs_sha256"]["257"]
    data["inputs_sha256"]["257"] = "0" * 64
    done = invoke("diff", str(old), str(_write(tmp_path, "other.json", data)))
    assert done.exit_code == 2 and f"inputs_sha256[257] {drawn} vs {'0' * 64}" in done.stderr
    allowed = invoke("diff", "--allow-different-problem", "-f", "json", str(old), str(tmp_path / "other.json"))
    assert allowed.exit_code == 0
    assert {"field": "inputs_sha256[257]", "old": drawn, "new": "0" * 64} in json.loads(allowed.stdout)["ops"][0][
        "environment"
    ]
    fewer = _h200("h3_bitwise_reuse.gate_residual.json")
    del fewer["inputs_sha256"]["257"]  # a case only one report drew inputs for is no difference
    assert invoke("diff", str(old), str(_write(tmp_path, "fewer.json", fewer))).exit_code == 0


def test_a_parallel_report_that_lost_a_tensor_is_lost(tmp_path):
    path = H200 / "parallel" / "h3_parallel.norm_modulate.sp_rows.json"
    data = _h200("parallel/h3_parallel.norm_modulate.sp_rows.json")
    name = next(n for n, c in data["results"].items() if "cases" in c and c["cases"])
    case = next(iter(data["results"][name]["cases"]))
    data["results"][name]["cases"][case]["native"]["out"] = []
    status, doc, _ = _lost(str(path), str(_write(tmp_path, "p.json", data)))
    assert status == 1 and [x["what"] for x in doc["lost"]] == [f"{name}, case {case}, native reduction: out"]


def test_diff_json_validates_against_its_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    from reports.diff import diff_json_schema

    data = _h200("h3_bitwise_reuse.gate_residual.json")
    del data["results"]["sglang_fused_residual"]
    _, doc, _ = _lost(str(H200 / "h3_bitwise_reuse.gate_residual.json"), str(_write(tmp_path, "n.json", data)))
    jsonschema.validate(doc, diff_json_schema())
    assert set(doc["counts"]) == {"regression", "improvement", "change", "noise", "kernel change", "lost"}
    assert doc["regressed"]
    assert doc["lost"] == [
        {
            "kind": "lost",
            "report": "h3_bitwise_reuse gate_residual",
            "what": "candidate sglang_fused_residual",
            "names": ["sglang_fused_residual", "gate_residual"],
            "old": data_reason(),
            "allowed": False,
        }
    ]


def data_reason() -> str:
    reason = load(H200 / "h3_bitwise_reuse.gate_residual.json")["results"]["sglang_fused_residual"]["unavailable"]
    return f"unavailable: {reason}"


def test_diff_has_max_size(tmp_path):
    path = str(H200 / "h3_bitwise_reuse.gate_residual.json")
    done = invoke("diff", path, path, "--max-size", "0.01")
    assert done.exit_code == 2 and "--max-size raises it" in done.stderr
    assert invoke("diff", path, path, "--max-size", "100").exit_code == 0


def test_the_gate_fails_on_a_requested_candidate_that_did_not_run_and_on_nothing_compared():
    """The H200 gate_residual report: sglang_fused_residual could not run there."""
    path = H200 / "h3_bitwise_reuse.gate_residual.json"
    clean = _h200("h3_bitwise_reuse.gate_residual.json")
    for cases in _mirrors(clean, "diffusers", "rl_kernel"):
        for case in cases.values():
            case["grads"]["gate"] = {"equal": True, "differ": 0, "numel": 48384, "max_abs": 0.0, "repeatable": True}
    report = parse_report(clean)
    assert gate([report], [path], None, "differ", requested=["diffusers"])[1] == []
    _, why = gate([report], [path], None, "differ", requested=["sglang_fused_residual"])
    assert why == ["h3_bitwise_reuse gate_residual: the requested candidate sglang_fused_residual did not run"]
    assert gate([report], [path], None, "differ", requested=["liger"])[1] == []  # not a candidate of this op
    broken = _h200("h3_bitwise_reuse.gate_residual.json")
    for name in ("diffusers", "rl_kernel"):
        broken["results"][name] = {"unavailable": "ImportError: planted"}
    _, why = gate([parse_report(broken)], [path], None, "differ")
    assert why == ["h3_bitwise_reuse gate_residual: nothing was compared (no candidate ran)"]


@pytest.mark.parametrize(
    "name, plant, wanted, says",
    [
        (
            "parallel/h3_parallel.norm_modulate.sp_rows.json",
            lambda d: d["results"]["liger"].update(failed="rank 1 exited with status 1\nTraceback ..."),
            "liger",
            "h3_parallel norm_modulate sp_rows: the requested candidate liger did not run everywhere: stopped early: "
            "rank 1 exited with status 1",
        ),
        (
            "chain/h3_conditioning_chain_replay.liger.json",
            lambda d: d["results"]["plain"]["lengths"].update({"4097": {"unavailable": "OutOfMemoryError: planted"}}),
            "liger",
            "h3_conditioning_chain_replay conditioning_chain: the requested candidate liger did not run everywhere: "
            "mode plain, length 4097: OutOfMemoryError: planted",
        ),
        (
            "trajectory/h3_denoising_trajectory.liger.json",
            lambda d: next(iter(d["results"].values()))["lengths"].update({"4097": {"unavailable": "planted"}}),
            "liger",
            "h3_denoising_trajectory denoising_trajectory: the requested candidate liger did not run everywhere: "
            "mode plain, length 4097: planted",
        ),
    ],
)
def test_the_gate_fails_on_a_requested_candidate_that_ran_but_not_everywhere(name, plant, wanted, says):
    whole = gate([parse_report(_h200(name))], [H200 / name], None, "differ", requested=[wanted])[1]
    assert not [w for w in whole if "did not run everywhere" in w]
    data = _h200(name)
    plant(data)
    _, why = gate([parse_report(data)], [H200 / name], None, "differ", requested=[wanted])
    assert says in why


def test_every_kind_names_no_candidate_incomplete_in_the_committed_reports():
    for path in sorted(H200.rglob("h3_*.json")):
        report = load_report(path)
        assert kind_of(report).incomplete(report.root) == {}, path


def test_the_gate_fails_on_lost_coverage_unless_allowed(tmp_path):
    path = H200 / "h3_bitwise_reuse.gate_residual.json"
    data = _h200("h3_bitwise_reuse.gate_residual.json")
    for cases in _mirrors(data, "diffusers", "rl_kernel"):
        for case in cases.values():
            del case["grads"]["gate"]
    new = parse_report(data)
    diff, why = gate([new], [path], load_set(path), "regression")
    assert diff.count("lost") == 4 and why and "4 lost" in why[0]
    assert gate([new], [path], load_set(path), "regression", allow_missing=["diffusers"])[1] == []
    assert gate([new], [path], load_set(path), "none")[1] == []


def test_schema_kind_diff_prints_the_schema_diff_json_is_checked_against():
    from reports.diff import diff_json_schema

    done = CliRunner().invoke(app, ["schema", "--kind", "diff"])
    assert done.exit_code == 0 and json.loads(done.stdout) == diff_json_schema()
