import copy
import json
from typing import get_args, get_type_hints

import pytest
from pydantic import BaseModel

from typer.testing import CliRunner

from audit.cli import app
from tests.helpers import FIXTURES, REPO, SEEDS, load
from reports.io import ReportError, load_report, parse_report, write_report
from reports.kinds import KINDS, json_schema


def test_five_example_reports_are_fixtures():
    assert {p.name for p in SEEDS} == {
        "h3_bitwise_reuse.adaln_projection.json",
        "h3_bitwise_reuse.gate_residual.json",
        "h3_bitwise_reuse.norm_modulate.json",
        "h3_bitwise_reuse.timestep_mlp.json",
        "h3_prior_art.adaln_projection.json",
    }


@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.name)
def test_example_reports_validate_and_round_trip_key_for_key(path):
    data = load(path)
    report = load_report(path)
    assert report.root.kind == data["kind"]
    assert report.model_dump(mode="json") == data


def test_written_report_round_trips(tmp_path):
    data = load(SEEDS[1])
    data["inputs_sha256"] = {str(c): "0" * 64 for c in data["cases"]}
    out = tmp_path / "sub" / "r.json"
    write_report(out, data)
    assert json.loads(out.read_text()) == data
    assert not [p for p in out.parent.iterdir() if p.name != "r.json"], "no temporary file left behind"


def test_unavailable_entries_and_comparison_errors_validate():
    data = load(SEEDS[2])  # norm_modulate
    data["results"]["sglang"] = {"unavailable": "sglang is not installed"}
    data["results"]["liger"]["vs diffusers"]["257"] = {"unavailable": "OutOfMemoryError: ..."}
    data["results"]["liger"]["vs diffusers"]["1"]["out"][0] = {
        "equal": False,
        "differ": 5376,
        "numel": 5376,
        "max_abs": None,
        "error": "(1, 5376) bfloat16 vs (1, 5376) float32",
    }
    assert parse_report(data).model_dump(mode="json") == data


@pytest.mark.parametrize(
    "mutate, where",
    [
        (
            lambda d: d["results"]["liger"]["vs diffusers"]["257"]["out"][0].__setitem__("differ", "many"),
            '$.results.liger["vs diffusers"]["257"].out[0].differ',
        ),
        (
            lambda d: d["results"]["liger"]["vs diffusers"]["4097"]["grads"]["x"].pop("numel"),
            '$.results.liger["vs diffusers"]["4097"].grads.x.numel',
        ),
        (lambda d: d["environment"].__setitem__("tf32", "off"), "$.environment.tf32"),
        (
            lambda d: d["results"]["liger"]["vs diffusers"]["1"]["out"][0].__setitem__("equal", True),
            '$.results.liger["vs diffusers"]["1"].out[0]',
        ),
    ],
)
def test_invalid_fields_are_named_by_json_path(mutate, where):
    data = copy.deepcopy(load(SEEDS[2]))
    mutate(data)
    with pytest.raises(ReportError) as info:
        parse_report(data)
    assert where in [w for w, _ in info.value.problems]


def test_prior_art_invalid_field_is_named():
    data = load(SEEDS[4])
    data["results"]["plain"]["rl_kernel"]["batch_invariance"]["batch_size_sweep"]["first_failures"] = [{"seed": 3}]
    with pytest.raises(ReportError) as info:
        parse_report(data)
    paths = [w for w, _ in info.value.problems]
    assert "$.results.plain.rl_kernel.batch_invariance.batch_size_sweep.first_failures[0].batch" in paths


def _models_in(model: type[BaseModel], seen: dict[str, type[BaseModel]]) -> dict[str, type[BaseModel]]:
    """``model`` and every model its fields (and its extra keys) hold, however nested in lists, dicts
    and unions."""
    seen[model.__name__] = model
    extra = get_type_hints(model).get("__pydantic_extra__")
    for annotation in [f.annotation for f in model.model_fields.values()] + ([extra] if extra else []):
        stack = [annotation]
        while stack:
            t = stack.pop()
            if isinstance(t, type) and issubclass(t, BaseModel):
                if t.__name__ not in seen:
                    _models_in(t, seen)
            else:
                stack.extend(get_args(t))
    return seen


@pytest.mark.parametrize("kind", [None, *KINDS])
def test_json_schema_has_every_field_and_every_required_field_of_every_model(kind):
    schema = json_schema(kind)
    defs = dict(schema.get("$defs", {}))
    if kind:
        defs[schema["title"]] = schema
    models: dict[str, type[BaseModel]] = {}
    for top in [KINDS[kind].model] if kind else [k.model for k in KINDS.values()]:
        _models_in(top, models)
    assert set(defs) == set(models)
    for name, model in models.items():
        assert set(defs[name]["properties"]) == set(model.model_fields), name
        required = {n for n, f in model.model_fields.items() if f.is_required()}
        assert set(defs[name].get("required", [])) == required, name
    if kind is None:
        assert {r["$ref"].rsplit("/", 1)[1] for r in schema["oneOf"]} == {k.model.__name__ for k in KINDS.values()}


H200 = REPO / "docs" / "evidence" / "h200"


def _is_report(path) -> bool:
    data = json.loads(path.read_text())
    return isinstance(data, dict) and data.get("kind") in KINDS


COMMITTED = sorted(p for p in [*FIXTURES.glob("*.json"), *H200.rglob("*.json")] if _is_report(p))


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: str(p.relative_to(REPO)))
def test_every_committed_report_agrees_with_itself(path):
    """Mirrored comparisons agree and every prior-art batch_invariant agrees with its checks."""
    load_report(path)


def _mirror_disagreement() -> dict:
    """The H200 gate_residual report with diffusers vs rl_kernel equal at 257 rows in dy while its
    mirror, rl_kernel vs diffusers, differs in one element."""
    data = load(H200 / "h3_bitwise_reuse.gate_residual.json")
    data["results"]["rl_kernel"]["vs diffusers"]["257"]["grads"]["y"].update(equal=False, differ=1, max_abs=0.5)
    return data


def test_mirrored_comparisons_that_disagree_are_invalid_and_the_field_is_named(tmp_path):
    with pytest.raises(ReportError) as found:
        parse_report(_mirror_disagreement())
    [(where, why)] = found.value.problems
    assert where == '$.results.diffusers["vs rl_kernel"]["257"].grads.y'
    assert '$.results.rl_kernel["vs diffusers"]["257"].grads.y' in why and "differ 0" in why and "1" in why


def test_a_tensor_only_one_mirror_compares_is_invalid():
    data = load(H200 / "h3_bitwise_reuse.gate_residual.json")
    del data["results"]["rl_kernel"]["vs diffusers"]["4097"]["grads"]["gate"]
    with pytest.raises(ReportError, match="tensors"):
        parse_report(data)


@pytest.mark.parametrize(
    "plant, says",
    [
        (
            lambda c: c.pop("257"),
            "lacks case 257 of the report's cases 1, 257, 4097, 32768: "
            "a comparison holds every case, compared or unavailable",
        ),
        (lambda c: c.__setitem__("5", c["1"]), "holds case 5, not among the report's cases 1, 257, 4097, 32768"),
    ],
)
def test_a_comparison_that_does_not_hold_every_case_of_the_report_is_invalid(plant, says):
    data = load(H200 / "h3_bitwise_reuse.gate_residual.json")
    for cases in (data["results"]["rl_kernel"]["vs diffusers"], data["results"]["diffusers"]["vs rl_kernel"]):
        plant(cases)
    with pytest.raises(ReportError) as found:
        parse_report(data)
    [(where, why)] = found.value.problems
    assert where == '$.results.diffusers["vs rl_kernel"]' and why == says


def test_a_report_of_many_cases_names_a_few_missing_ones_and_counts_the_rest():
    data = load(H200 / "h3_bitwise_reuse.gate_residual.json")
    data["cases"] = list(range(1, 40_001))
    with pytest.raises(ReportError) as found:
        parse_report(data)
    [(where, why)] = found.value.problems
    assert where == '$.results.diffusers["vs rl_kernel"]'
    first = "lacks case 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13 and 39,984 more of the report's cases 1, 2, "
    assert why.startswith(first)
    assert len(why) < 300


def test_inputs_of_a_case_the_report_does_not_hold_are_invalid():
    data = load(H200 / "h3_bitwise_reuse.gate_residual.json")
    data["inputs_sha256"]["5"] = "0" * 64
    with pytest.raises(ReportError) as found:
        parse_report(data)
    assert found.value.problems == [('$.inputs_sha256["5"]', "not among the report's cases 1, 257, 4097, 32768")]


def test_phases_that_add_up_to_more_than_the_wall_time_are_invalid():
    data = load(H200 / "h3_bitwise_reuse.timestep_mlp.json")
    data["timing"]["modes"]["plain"]["wall"] = 1.0
    with pytest.raises(ReportError) as found:
        parse_report(data)
    [(where, why)] = found.value.problems
    assert where == "$.timing.modes.plain.phases" and why.endswith("s, more than the wall time, 1.0 s")


def test_a_parallel_candidate_that_lacks_a_case_says_why_or_the_report_is_invalid():
    data = load(H200 / "parallel" / "h3_parallel.norm_modulate.sp_rows.json")
    del data["results"]["liger"]["cases"]["128"]
    with pytest.raises(ReportError) as found:
        parse_report(data)
    assert found.value.problems == [
        ("$.results.liger.cases", "lacks case 128 without saying why: a run that stopped says so in failed")
    ]
    data["results"]["liger"]["failed"] = "rank 1 failed: OutOfMemoryError"
    assert parse_report(data).root.results["liger"].failed.startswith("rank 1")
    data["results"]["liger"]["cases"]["5"] = data["results"]["liger"]["cases"]["2"]
    with pytest.raises(ReportError, match="case 5 is not among 2, 128"):
        parse_report(data)


@pytest.mark.parametrize(
    "name", ["chain/h3_conditioning_chain_replay.liger.json", "trajectory/h3_denoising_trajectory.liger.json"]
)
def test_a_mode_that_lacks_a_length_or_inputs_of_another_length_are_invalid(name):
    data = load(H200 / name)
    mode, result = next((m, r) for m, r in data["results"].items() if "lengths" in r)
    del result["lengths"]["4097"]
    with pytest.raises(ReportError) as found:
        parse_report(data)
    assert found.value.problems == [(f"$.results.{mode}.lengths", "holds 257 where the report's are 257, 4097")]
    data = load(H200 / name)
    data["inputs_sha256"]["5"] = "0" * 64
    with pytest.raises(ReportError, match="not among the report's lengths 257, 4097"):
        parse_report(data)


def _invariant_but_the_sweep_differs() -> dict:
    data = load(H200 / "h3_prior_art.gate_residual.json")
    mode = next(m for m in data["results"].values() if "unavailable" not in m)
    entry = next(c for c in mode.values() if "unavailable" not in c and c["batch_invariance"]["batch_invariant"])
    entry["batch_invariance"]["batch_size_sweep"]["differ"] = 5
    return data


def test_batch_invariant_that_contradicts_its_checks_is_invalid():
    with pytest.raises(ReportError) as found:
        parse_report(_invariant_but_the_sweep_differs())
    [(where, why)] = found.value.problems
    assert where.endswith(".batch_invariance.batch_invariant") and "batch-size sweep: 5/" in why
    data = load(H200 / "h3_prior_art.gate_residual.json")
    mode = next(m for m in data["results"].values() if "unavailable" not in m)
    entry = next(c for c in mode.values() if "unavailable" not in c and c["batch_invariance"]["batch_invariant"])
    entry["batch_invariance"]["batch_invariant"] = False
    with pytest.raises(ReportError, match="every check found nothing"):
        parse_report(data)


@pytest.mark.parametrize("planted", [_mirror_disagreement, _invariant_but_the_sweep_differs])
def test_validate_names_a_contradiction_and_show_and_diff_refuse_it(tmp_path, planted):
    data = planted()
    path = tmp_path / "planted.json"
    path.write_text(json.dumps(data))
    original = H200 / f"{data['kind']}.{data['op']}.json"
    done = CliRunner().invoke(app, ["validate", str(path)])
    assert done.exit_code == 1 and "$.results." in done.stderr, done.output
    assert CliRunner().invoke(app, ["show", str(path)]).exit_code == 2
    for args in ([str(original), str(path)], [str(path), str(original)]):
        done = CliRunner().invoke(app, ["diff", *args])
        assert done.exit_code == 2 and "planted.json" in done.stderr, done.output
