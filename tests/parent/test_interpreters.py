"""Named Python environments: audit.toml, --env/--mode-env, MODE@ENV, the probe of an interpreter,
and (slow) a real second venv whose mode is compared bitwise with this one's."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from audit.core.candidates import get_candidate
from audit.cli import app
from audit.parent.interpreters import ConfigError, load, probe
from modes import MODES, get_mode

from reports.io import load_report

from tests.helpers import REPO

runner = CliRunner()
KNOWN = list(MODES)


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """A real venv without torch (nor anything else)."""
    root = tmp_path_factory.mktemp("bare")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    return str(root / "venv" / "bin" / "python")


def test_config_file_and_command_line_name_environments(tmp_path):
    config = tmp_path / "audit.toml"
    config.write_text(
        '[environments]\ntrainer = "/opt/t/bin/python"\nrollout = "/opt/r/bin/python"\n[modes]\nsglang = "rollout"\n'
    )
    envs = load(config, envs=["rollout=/other/bin/python"], mode_envs=["megatron_triton=trainer"], known_modes=KNOWN)
    assert envs.pythons == {"trainer": "/opt/t/bin/python", "rollout": "/other/bin/python"}
    assert envs.python_for("sglang") == ("rollout", "/other/bin/python")
    assert envs.python_for("megatron_triton") == ("trainer", "/opt/t/bin/python")
    assert envs.python_for("plain@trainer") == ("trainer", "/opt/t/bin/python")
    assert envs.python_for("plain") == (None, sys.executable)


@pytest.mark.parametrize(
    "text, envs, mode_envs, message",
    [
        ("[modes]\nsglang = 'nowhere'\n", [], [], "not named"),
        ("[modes]\nfast = 'x'\n[environments]\nx = '/p'\n", [], [], "'fast' is not a mode"),
        ("[environments]\nx = 3\n", [], [], "must map names to strings"),
        ("[envs]\n", [], [], "unknown table"),
        ("not toml [", [], [], "not TOML"),
        ("", ["nopython"], [], "expected NAME=VALUE"),
        ("", [], ["vllm=ghost"], "not named"),
    ],
)
def test_bad_configuration_is_one_clear_error(tmp_path, text, envs, mode_envs, message):
    config = tmp_path / "audit.toml"
    config.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load(config, envs=envs, mode_envs=mode_envs, known_modes=KNOWN)


def test_mode_at_environment_is_the_same_mode_under_another_name():
    mode = get_mode("sglang@rollout")
    assert mode.name == "sglang@rollout" and mode.base == "sglang" and mode.environment == "rollout"
    assert mode.env == MODES["sglang"].env and mode.enable == MODES["sglang"].enable
    diffusers_gemm = get_candidate("adaln_projection", "diffusers")
    rl_rows = get_candidate("gate_residual", "rl_kernel")
    assert diffusers_gemm.report_name("sglang@rollout") == "diffusers[sglang@rollout]"
    assert rl_rows.report_name("plain@rollout") == "rl_kernel@rollout" and rl_rows.runs_in("plain@rollout")
    assert not rl_rows.runs_in("sglang@rollout")
    with pytest.raises(KeyError):
        get_mode("plain@")


def test_probe_says_exactly_why_an_interpreter_cannot_run_the_worker(tmp_path, bare_python):
    assert probe(str(tmp_path / "no" / "python"), timeout=60)["problem"].endswith("does not exist")
    bare = probe(bare_python, timeout=60)
    assert "missing torch" in bare["problem"] and "safetensors" in bare["problem"]
    here = probe(sys.executable, timeout=60)
    assert "problem" not in here and here["torch"].startswith("2.") and "diffusers" in here["libraries"]
    assert "sees no CUDA device" in probe(sys.executable, needs_cuda=True, timeout=60)["problem"]


@pytest.mark.parametrize("answer", ["42", "[1, 2]", '{"python": "x"}', '{"python": "x", "python_version": "3"}'])
def test_an_interpreter_that_answers_anything_but_the_expected_object_is_not_usable(tmp_path, answer):
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\necho '{answer}'\n")
    fake.chmod(0o755)
    assert "is not a usable Python" in probe(str(fake), timeout=30)["problem"]


def test_a_hanging_interpreter_times_out_and_leaves_no_process(tmp_path):
    from tests.helpers import alive

    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nsleep 600 &\necho $! > {tmp_path}/child\nwait\n")
    fake.chmod(0o755)
    assert probe(str(fake), timeout=2)["problem"].endswith("timed out after 2 s without answering")
    assert not alive(int((tmp_path / "child").read_text()))


def test_a_relative_interpreter_is_the_one_next_to_the_config_file(tmp_path, monkeypatch):
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "audit.toml").write_text('[environments]\nrel = "venv/bin/python"\n')
    monkeypatch.chdir(REPO)
    envs = load(tmp_path / "cfg" / "audit.toml", envs=["cwd=bin/python"], mode_envs=[], known_modes=list(MODES))
    assert envs.pythons == {"rel": str(tmp_path / "cfg" / "venv/bin/python"), "cwd": str(REPO / "bin/python")}


def test_unnamed_environment_in_a_mode_is_a_usage_error():
    r = runner.invoke(app, ["run", "--op", "gate_residual", "--case", "1", "--mode", "plain@ghost"])
    assert r.exit_code == 2 and "environment 'ghost' is not named" in r.output


def test_env_check_reports_each_environment_and_fails_on_a_broken_one(bare_python):
    r = runner.invoke(
        app,
        ["env", "check", "--device", "cpu", "--env", f"here={sys.executable}", "--env", f"bare={bare_python}"],
        env={"COLUMNS": "300"},
    )
    assert r.exit_code == 1, r.output
    assert "missing torch" in r.output
    assert "gate_residual candidates" in r.output and "rl_kernel" in r.output  # what can run in 'here'


def _venv_with_torch(root: Path) -> str:
    """A second real venv: torch 2.13.0 (CPU), safetensors, numpy and diffusers, installed by pip.
    Without pip's byte-compiling of every module (--no-compile): the test's two processes in this
    venv compile only what they import."""
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    python = str(root / "bin" / "python")
    subprocess.run(
        [python, "-m", "pip", *"install -q --no-compile torch==2.13.0 safetensors numpy diffusers==0.42.1".split()],
        check=True,
        timeout=1500,
    )
    return python


@pytest.mark.slow
def test_a_mode_in_a_second_venv_is_compared_bitwise_and_recorded(tmp_path, bare_python):
    from tests.helpers import audit_in_process

    rollout = _venv_with_torch(tmp_path / "rollout")
    config = tmp_path / "audit.toml"
    config.write_text(f'[environments]\nrollout = "{rollout}"\nbare = "{bare_python}"\n')
    out = tmp_path / "r.json"
    done = audit_in_process(
        *"run --op gate_residual --device cpu --case 3".split(),
        "--config",
        str(config),
        *"--mode plain --mode plain@rollout --mode plain@bare".split(),
        "--out",
        str(out),
        "-q",
    )
    assert done.returncode == 0, done.stderr
    report = load_report(out).root
    data = json.loads(out.read_text())
    modes = data["environment"]["modes"]
    assert modes["plain@rollout"]["environment"] == "rollout" and modes["plain@rollout"]["python"] == rollout
    assert (
        modes["plain@rollout"]["torch"].startswith("2.13.0")
        and modes["plain@rollout"]["inputs_sha256_as_plain"] is True
    )
    assert modes["plain"]["environment"] is None and modes["plain"]["python"] != rollout
    assert "missing torch" in modes["plain@bare"]["unavailable"]
    # the rollout venv's diffusers and rl_kernel against this environment's references, bit for bit
    for name in ("diffusers@rollout", "rl_kernel@rollout"):
        for ref in ("diffusers", "rl_kernel"):
            case = report.results[name].__pydantic_extra__[f"vs {ref}"]["3"]
            assert all(c.equal and c.repeatable for c in [*case.out, *case.grads.values()]), (name, ref)
    assert "missing torch" in data["results"]["diffusers@bare"]["unavailable"]
