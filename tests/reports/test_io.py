"""Hostile report files: `validate` exits 1 and `show` exits 2, each with one clear line, no
traceback and no hang; values no real comparison can produce make a report invalid."""

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from audit.cli import app
from tests.helpers import SEEDS, load
from reports.io import ReportError, load_report, load_set, parse_report

from tests.helpers import REPO

GATE = next(p for p in SEEDS if p.name == "h3_bitwise_reuse.gate_residual.json")


def audit(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "audit", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200"},
    )


def hostile_files(tmp: Path) -> dict[str, tuple[Path, str]]:
    """name -> (path, words the one-line message must contain)."""
    files = {
        "deep": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        "long_int": ('{"kind": "h3_bitwise_reuse", "op": ' + "9" * 5000 + "}", "not JSON"),
        "surrogate": ('{"kind": "h3_bitwise_reuse", "op": "\\ud800"}', "lone surrogate"),
    }
    out = {}
    for name, (text, words) in files.items():
        (tmp / f"{name}.json").write_text(text)
        out[name] = (tmp / f"{name}.json", words)
    os.mkfifo(tmp / "fifo.json")
    out["fifo"] = (tmp / "fifo.json", "not a regular file (a FIFO)")
    out["dev_zero"] = (Path("/dev/zero"), "not a regular file")
    big = tmp / "big.json"
    with open(big, "wb") as f:
        f.truncate(257 * 2**20)  # sparse: over the default 256 MB limit without using the disk
    out["too_big"] = (big, "larger than the 256 MB limit")
    return out


def one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[:2000]
    return lines[0]


def test_validate_names_each_hostile_file_on_one_line_and_exits_1(tmp_path):
    files = hostile_files(tmp_path)
    done = audit("validate", *(str(p) for p, _ in files.values()))
    assert done.returncode == 1, done.stderr[:2000]
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == len(files), done.stderr[:2000]
    for (path, words), line in zip(files.values(), lines):
        assert line.startswith(str(path)) and words in line, line


@pytest.mark.parametrize("name", ["deep", "long_int", "surrogate", "too_big"])
def test_show_refuses_a_hostile_file_with_one_line_and_status_2(tmp_path, name):
    path, words = hostile_files(tmp_path)[name]
    done = CliRunner().invoke(app, ["show", str(path)])
    assert done.exit_code == 2
    assert words in one_line(done.stderr) and not done.stdout


@pytest.mark.parametrize("name", ["fifo", "dev_zero"])
def test_show_does_not_block_on_a_fifo_or_a_device(tmp_path, name):
    path, words = hostile_files(tmp_path)[name]
    done = audit("show", str(path))  # a subprocess with a timeout: a blocking read fails the test
    assert done.returncode == 2
    assert words in one_line(done.stderr)


def test_max_size_sets_the_limit(tmp_path):
    runner = CliRunner()
    assert runner.invoke(app, ["validate", "--max-size", "0.001", str(GATE)]).exit_code == 1
    assert runner.invoke(app, ["show", "--max-size", "1", str(GATE)]).exit_code == 0
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(257 * 2**20)
    with pytest.raises(ReportError, match="not JSON"):  # read whole under a raised limit
        load_report(big, max_mb=300)


def _first_cmp(d: dict) -> dict:
    return d["results"]["diffusers"]["vs rl_kernel"]["257"]["grads"]["gate"]


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("max_abs", float("nan"), "finite"),
        ("max_abs", float("inf"), "finite"),
        ("differ", 48_385, "cannot exceed numel"),
        ("differ", -1, "greater than or equal to 0"),
        ("numel", -5, "greater than or equal to 0"),
    ],
)
def test_values_no_comparison_can_produce_are_invalid(field, value, words):
    data = copy.deepcopy(load(GATE))
    _first_cmp(data)[field] = value
    with pytest.raises(ReportError) as info:
        parse_report(data)
    assert any(words in msg for _, msg in info.value.problems), info.value.problems


@pytest.mark.parametrize("token", ["NaN", "Infinity", "1e400"])
def test_non_finite_max_abs_in_the_file_is_invalid(tmp_path, token):
    text = GATE.read_text().replace('"max_abs": 0.375', f'"max_abs": {token}', 1)
    assert token in text
    (tmp_path / "r.json").write_text(text)
    with pytest.raises(ReportError, match="max_abs"):
        load_report(tmp_path / "r.json")


def test_a_negative_prior_art_count_is_invalid():
    data = copy.deepcopy(load(next(p for p in SEEDS if p.name.startswith("h3_prior_art"))))
    data["results"]["plain"]["rl_kernel"]["batch_invariance"]["batch_size_sweep"]["comparisons"] = -2256
    with pytest.raises(ReportError, match="comparisons"):
        parse_report(data)


@pytest.fixture(scope="module")
def big_report(tmp_path_factory) -> Path:
    """The gate_residual example with 50,000 cases of diffusers vs rl_kernel: 200,000 comparisons."""
    data = load(GATE)
    one = data["results"]["diffusers"]["vs rl_kernel"]["257"]  # an output and three gradients: 4 comparisons
    cases = range(1, 50_001)
    data["cases"] = list(cases)
    data["results"]["diffusers"]["vs rl_kernel"] = {str(c): one for c in cases}
    data["results"]["rl_kernel"]["vs diffusers"] = data["results"]["diffusers"]["vs rl_kernel"]  # its mirror
    path = tmp_path_factory.mktemp("big") / "big.json"
    path.write_text(json.dumps(data))
    return path


def test_a_report_with_200k_comparisons_shows_in_seconds(big_report):
    start = time.monotonic()
    done = CliRunner().invoke(app, ["show", str(big_report)])
    assert done.exit_code == 0, done.output[-2000:]
    assert time.monotonic() - start < 60
    assert "49,000 more rows not shown (49,000 of them differ or are unavailable)" in done.stdout


def test_a_diff_that_loses_50k_cases_ends_in_seconds(big_report):
    """Each lost case's old state comes from one pass over the old report, not one pass per case
    (which takes hours here); in a subprocess, so that a slow diff fails the test at its timeout."""
    done = audit("diff", str(big_report), str(GATE), "--format", "json", timeout=60)
    assert done.returncode == 1, done.stderr[-2000:]
    lost = [x for x in json.loads(done.stdout)["lost"] if x["what"].startswith("case ")]
    assert len(lost) == 49_996 and {x["old"] for x in lost} == {"differs"}


def _dir_with(tmp: Path, name: str) -> tuple[Path, str]:
    """A directory holding a real report and one hostile ``*.json``; the words its error names."""
    folder = tmp / name
    folder.mkdir()
    (folder / GATE.name).write_text(GATE.read_text())
    hostile = folder / "x.json"
    if name == "fifo":
        os.mkfifo(hostile)
        return folder, "x.json: $: not a regular file (a FIFO)"
    if name == "dev_zero":
        hostile.symlink_to("/dev/zero")
        return folder, "x.json: $: not a regular file (a device or special file)"
    if name == "deep":
        hostile.write_text("[" * 100_000 + "]" * 100_000)
        return folder, "x.json: $: not JSON: nested too deeply"
    (folder / "y.json").symlink_to(hostile)
    hostile.symlink_to(folder / "y.json")
    return folder, "a loop of symbolic links"


@pytest.mark.parametrize("name", ["fifo", "dev_zero", "deep", "loop"])
def test_a_hostile_file_in_a_directory_is_one_line_and_status_2_at_once(tmp_path, name):
    """``diff DIR`` and ``run --baseline DIR`` read each file as ``show`` does: never blocking."""
    folder, words = _dir_with(tmp_path, name)
    done = audit("diff", str(folder), str(GATE), timeout=30)  # a subprocess: a blocking read fails the test
    assert done.returncode == 2 and words in one_line(done.stderr)
    done = audit("run", "--op", "gate_residual", "--case", "1", "--baseline", str(folder), timeout=30)
    assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr
    started = time.monotonic()
    with pytest.raises(ReportError) as raised:
        load_set(folder)
    assert words in str(raised.value) and time.monotonic() - started < 2


def test_a_symlink_loop_given_as_the_set_says_it_is_a_loop_and_an_empty_directory_holds_no_report(tmp_path):
    (tmp_path / "a.json").symlink_to(tmp_path / "b.json")
    (tmp_path / "b.json").symlink_to(tmp_path / "a.json")
    with pytest.raises(ReportError, match="a loop of symbolic links"):
        load_set(tmp_path / "a.json")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="no report in this directory"):
        load_set(tmp_path / "empty")
