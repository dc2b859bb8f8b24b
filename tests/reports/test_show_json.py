"""``audit show --format json``: one document for any number of files, with each report's verdicts
and comparisons, narrowed by --candidate and --only-differ, valid against the schema that
``audit schema --kind verdicts`` prints; ``audit schema --kind diff`` prints the diff's."""

import json

import pytest
from typer.testing import CliRunner

from audit.cli import app
from reports.show_json import ShowDocument
from tests.helpers import FIXTURES, REPO

H200 = REPO / "docs" / "evidence" / "h200"
ONE_OF_EACH = [
    FIXTURES / "h3_bitwise_reuse.gate_residual.json",
    FIXTURES / "h3_prior_art.adaln_projection.json",
    H200 / "chain" / "h3_conditioning_chain_replay.liger.json",
    H200 / "parallel" / "h3_parallel.norm_modulate.sp_rows.json",
]
NORM = H200 / "h3_bitwise_reuse.norm_modulate.json"


def show_json(*args: str) -> dict:
    done = CliRunner().invoke(app, ["show", "--format", "json", *args])
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)  # one document, whatever the number of files
    valid = ShowDocument.model_validate_json(done.stdout)  # the model the schema is generated from
    assert valid.model_dump(mode="json") == document  # and nothing the model does not know
    return document


def test_the_printed_schema_is_the_models():
    done = CliRunner().invoke(app, ["schema", "--kind", "verdicts"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == ShowDocument.model_json_schema()


def test_every_kind_in_one_document():
    document = show_json(*map(str, ONE_OF_EACH))
    assert [r["path"] for r in document["reports"]] == list(map(str, ONE_OF_EACH))
    assert [r["kind"] for r in document["reports"]] == [
        "h3_bitwise_reuse",
        "h3_prior_art",
        "h3_conditioning_chain_replay",
        "h3_parallel",
    ]
    gate = document["reports"][0]
    assert gate["op"] == "gate_residual"
    assert gate["verdicts"] == [
        {
            "candidate": "diffusers",
            "reference": "rl_kernel",
            "mode": None,
            "verdict": "forward only",
            "status": "partial",
            "detail": "output equal in every case; dgate from case 257",
            "install": None,
        }
    ]
    table = next(t for t in gate["comparisons"] if t["title"] == "diffusers vs rl_kernel")
    assert table["columns"] == ["case", "out", "dres", "dy", "dgate"]
    case_257 = next(row for row in table["rows"] if row[0]["text"] == "257")
    assert case_257[4]["comparison"] == {"equal": False, "differ": 35_402, "numel": 48_384, "max_abs": 0.375}
    assert case_257[1]["status"] == "ok" and case_257[1]["comparison"]["equal"] is True


def test_candidate_narrows_verdicts_and_comparisons():
    whole = show_json(str(NORM))["reports"][0]
    liger = show_json("--candidate", "liger", str(NORM))["reports"][0]
    assert len(liger["verdicts"]) < len(whole["verdicts"])
    assert liger["verdicts"] and all("liger" in (v["candidate"], v["reference"]) for v in liger["verdicts"])
    pairs = [t["title"] for t in liger["comparisons"] if t["columns"]]
    assert pairs == ["liger vs diffusers", "liger vs rl_kernel"]


def test_only_differ_leaves_out_equal_cells():
    whole = show_json(str(NORM))["reports"][0]
    differ = show_json("--only-differ", str(NORM))["reports"][0]

    def cells(report: dict) -> list[dict]:
        return [c for t in report["comparisons"] for row in t["rows"] for c in row[1:]]

    assert any(c["status"] == "ok" for c in cells(whole))
    assert not any(c["status"] == "ok" for c in cells(differ))
    assert [c for c in cells(differ) if c["text"]] == [c for c in cells(whole) if c["status"] != "ok"]


@pytest.mark.parametrize("path", ONE_OF_EACH, ids=lambda p: p.name)
def test_a_missing_candidate_is_still_refused(path):
    done = CliRunner().invoke(app, ["show", "--format", "json", "--candidate", "no-such-candidate", str(path)])
    assert done.exit_code == 2 and "no candidate" in done.stderr
