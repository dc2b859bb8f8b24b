"""Unavailable verdicts come after the real ones, each with the extra that installs what it misses;
every extra named in ``reports.hints`` exists in pyproject.toml."""

import copy
import sys

import pytest

from reports.hints import EXTRAS, OWN_ENVIRONMENT, install_hint
from reports.io import parse_report
from reports.kinds import KINDS
from reports.tables import View
from tests.helpers import FIXTURES, REPO, load

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

GATE = FIXTURES / "h3_bitwise_reuse.gate_residual.json"
PRIOR_ART = FIXTURES / "h3_prior_art.adaln_projection.json"
OMNI = (
    "a venv of its own, pip install vllm-omni==0.30.0 'vllm>=0.30,<0.31' safetensors, audited as --mode plain@ENV "
    "(README: Auditing across environments)"
)


def test_every_extra_named_exists_in_pyproject():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS.values()) <= set(extras)


def test_every_environment_of_its_own_installs_what_pyproject_says_it_needs():
    """pyproject.toml says why a module has no extra and what its environment installs: the hint's
    ``pip install`` line is that one, word for word."""
    text = (REPO / "pyproject.toml").read_text()
    for module, pip in OWN_ENVIRONMENT.items():
        assert pip in text, (module, pip)


@pytest.mark.parametrize(
    ("reason", "hint"),
    [
        ("sglang is not installed", "pip install '.[sglang]'"),
        ("liger_kernel is not installed; needs a CUDA device; this run uses cpu", "pip install '.[liger]'"),
        ("transformer_engine is not installed; transformer_engine_torch is not installed", "pip install '.[te]'"),
        (
            "enable_batch_invariant_mode() failed: ModuleNotFoundError: No module named 'transformer_engine.pytorch'",
            "pip install '.[te]'",
        ),
        ("No module named 'matplotlib'", "pip install '.[plot]'"),
        ("import x failed: ModuleNotFoundError: No module named 'cutlass'", None),  # no extra brings it
        ("OutOfMemoryError: CUDA out of memory", None),
        ("vllm_omni is not installed", OMNI),
        ("sglang is not installed; vllm_omni is not installed", f"pip install '.[sglang]'; {OMNI}"),
    ],
)
def test_install_hint(reason, hint):
    assert install_hint(reason) == hint


def _verdict_rows(data: dict, kind: str) -> list[list[str]]:
    report = parse_report(data)
    table = next(s for s in KINDS[kind].sections(report.root, View()) if s.title == "verdicts")
    return [[c.text for c in row] for row in table.rows]


def test_unavailable_candidates_come_last_with_their_hint():
    data = copy.deepcopy(load(GATE))
    data["results"] = {"sglang": {"unavailable": "sglang is not installed"}, **data["results"]}
    rows = _verdict_rows(data, "h3_bitwise_reuse")
    assert [r[2] for r in rows] == ["forward only", "unavailable"]
    assert rows[-1][0] == "sglang" and rows[-1][3] == "sglang is not installed · install: pip install '.[sglang]'"


def test_unavailable_prior_art_modes_come_last():
    data = copy.deepcopy(load(PRIOR_ART))
    first = next(iter(data["results"]))
    others = {mode: found for mode, found in data["results"].items() if mode != "vllm"}
    data["results"] = {"vllm": {"unavailable": "vllm is not installed"}, **others}
    rows = _verdict_rows(data, "h3_prior_art")
    verdicts = [r[2] for r in rows]
    assert "unavailable" in verdicts and verdicts.index("unavailable") > 0
    assert all(v == "unavailable" for v in verdicts[verdicts.index("unavailable") :])
    assert rows[0][0] == first
    assert ["vllm", "mode vllm", "unavailable", "vllm is not installed · install: pip install '.[vllm]'"] in rows
