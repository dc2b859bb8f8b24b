"""What the command line prints off a terminal and for user-given strings: no line broken inside
a number or a path, rich markup in paths and hints printed as it is, --version and -h."""

import os
import subprocess
import sys

from tests.helpers import SEEDS

from tests.helpers import REPO

GATE = next(p for p in SEEDS if p.name == "h3_bitwise_reuse.gate_residual.json")


def audit_in_a_pipe(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``audit ARGS`` with stdout and stderr going to pipes, as in CI, with COLUMNS unset."""
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run(
        [sys.executable, "-m", "audit", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**base, **(env or {})},
    )


def test_tables_in_a_pipe_do_not_wrap_inside_numbers():
    done = audit_in_a_pipe("show", str(GATE))
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("│ 257 ")]
    assert rows and all("35,402/48,384 differ, max 0.375" in row and "1,381,632" in row for row in rows), done.stdout


def test_version_and_short_help():
    from typer.testing import CliRunner

    from audit.cli import app

    runner = CliRunner()
    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and version.output.startswith("audit (bitwise-reuse-audit) ")
    for args in (["-h"], ["run", "-h"], ["show", "-h"]):
        done = runner.invoke(app, args)
        assert done.exit_code == 0 and "Usage: " in done.output, args


def test_the_missing_matplotlib_hint_keeps_its_brackets(tmp_path):
    """A real failed import: a directory that shadows matplotlib with a module that raises ImportError."""
    shadow = tmp_path / "matplotlib"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('No module named matplotlib (shadowed by the test)')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = audit_in_a_pipe("plot", str(GATE), "--out", str(tmp_path / "g.png"), env=env)
    assert done.returncode == 2
    assert "pip install '.[plot]'" in done.stderr, done.stderr
