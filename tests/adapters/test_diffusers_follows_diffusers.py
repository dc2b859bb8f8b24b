"""The diffusers reference runs diffusers' code: ``audit run`` against a copy of diffusers whose
``MiniMaxH3TransformerBlock.forward`` writes another expression reports the ``diffusers`` candidate
as different from ``rl_kernel``, where against the installed diffusers it is bitwise equal.

The copy is a real package on ``PYTHONPATH``, which the launcher keeps for the mode worker and
records in ``mode_environment``: every file a link to the installed one's, except
``transformer_minimax_h3.py``, which has one expression changed. Nothing is mocked."""

import importlib.util
import os
import shutil
from pathlib import Path

import pytest
from tests.helpers import audit_in_process, load

CHANGES = {  # op -> (the expression in the installed block's forward, the copy's)
    "norm_modulate": (
        "1.0 + scale_msa.index_select(0, adaln_indices)",
        "1.0 + 2 * scale_msa.index_select(0, adaln_indices)",
    ),
    "gate_residual": (
        "residual + gate_msa.index_select(0, adaln_indices) * attn_output",
        "residual + 2 * gate_msa.index_select(0, adaln_indices) * attn_output",
    ),
}


@pytest.fixture(scope="module")
def changed_diffusers(tmp_path_factory) -> Path:
    """A directory holding a ``diffusers`` package that shadows the installed one, with CHANGES made."""
    installed = Path(importlib.util.find_spec("diffusers").origin).parent
    root = tmp_path_factory.mktemp("changed")
    shutil.copytree(
        installed, root / "diffusers", ignore=shutil.ignore_patterns("__pycache__"), copy_function=os.symlink
    )
    h3 = root / "diffusers" / "models" / "transformers" / "transformer_minimax_h3.py"
    source = h3.read_text()
    for old, new in CHANGES.values():
        assert source.count(old) == 1, f"the installed block's forward no longer writes {old!r}"
        source = source.replace(old, new)
    h3.unlink()  # the link, not the installed file
    h3.write_text(source)
    return root


def _against_rl_kernel(out: Path, op: str, pythonpath: str | None) -> tuple[dict, dict]:
    """``audit run --op OP --case 1 --candidate diffusers`` on the CPU: the report and the
    comparison of the diffusers candidate with rl_kernel at S = 1."""
    env = {"PYTHONPATH": os.pathsep.join(filter(None, (pythonpath, os.environ.get("PYTHONPATH"))))}
    done = audit_in_process(
        "run", "--op", op, "--device", "cpu", "--case", "1", "--candidate", "diffusers", "--out", str(out), env=env
    )
    assert done.returncode == 0, done.stderr
    report = load(out)
    return report, report["results"]["diffusers"]["vs rl_kernel"]["1"]


@pytest.mark.parametrize("op", CHANGES)
def test_the_diffusers_reference_follows_a_changed_block_forward(op, changed_diffusers, tmp_path, request):
    if op == "gate_residual":  # the same run against the installed diffusers, shared with other modules (conftest)
        installed = load(request.getfixturevalue("gate_residual_case_1"))["results"]["diffusers"]["vs rl_kernel"]["1"]
    else:
        _, installed = _against_rl_kernel(tmp_path / "installed.json", op, None)
    report, changed = _against_rl_kernel(tmp_path / "changed.json", op, str(changed_diffusers))
    assert installed["out"][0]["equal"] and installed["out"][0]["differ"] == 0
    assert not changed["out"][0]["equal"] and changed["out"][0]["differ"] > 0 and changed["out"][0]["repeatable"]
    assert report["environment"]["mode_environment"]["plain"]["PYTHONPATH"].startswith(str(changed_diffusers))
    assert "MiniMaxH3TransformerBlock.forward" in report["results"]["diffusers"]["source"]
