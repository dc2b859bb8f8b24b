import copy
import json
from typing import get_args, get_type_hints

import pytest
from pydantic import BaseModel

from tests.helpers import SEEDS, load
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
