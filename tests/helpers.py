"""What several test modules share: where the repository and the example reports are, the
command line as a real subprocess or with this process as its own (its workers are processes of
their own either way), and whether a process is still running."""

import json
import os
import subprocess
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

from audit.parent import launch

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
SEEDS = sorted(FIXTURES.glob("*.json"))
# The worker templates of this pytest process (``tests/conftest.py`` starts them for the session and
# names their folder in $AUDIT_TEMPLATES, so that commands run as processes fork from them too).
SESSION_TEMPLATES: list[launch.Templates] = []


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def audit(*args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """``audit ARGS`` in a subprocess from the repository, 200 columns wide: for what needs the
    command's own interpreter (signals, a blocking read under a timeout, another console width, the
    real start-up) and for plugins that patch the process they are imported into (blunt_comparator,
    flaky_attention, no_profiler, exits_at_import)."""
    return subprocess.run(
        [sys.executable, "-m", "audit", *args],
        cwd=REPO,
        env={**os.environ, "COLUMNS": "200", **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def audit_in_process(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """``audit ARGS`` run by the typer app in this process (typer's CliRunner), from the repository,
    with COLUMNS=200 and ``env`` added to the environment while it runs (the consoles keep the width
    they took when ``audit.cli`` was imported). The command's own process is this one; the workers
    it starts are processes of their own, with that environment, as from the command line; they are
    forked from the session's templates, which start new ones for a key's second worker, unless
    ``env`` names a variable the templates are keyed on (a numerics variable, say: such a template
    would serve one test and outlive it). So it runs every command without an interpreter start and
    torch's import for the command itself, and most of its workers without either. The answer is
    what ``audit`` gives: the exit status, stdout and stderr. The $AUDIT_PLUGINS modules
    in ``env`` register into a copy of the candidate registry that holds none of their candidates
    (a test may have imported one here), dropped afterwards, so other tests' in-process runs do not
    plan candidates their workers would not know. A TMPDIR in ``env`` is the command's temporary
    directory, as in a process of its own (``tempfile`` forgets the directory it found while the
    command runs). A plugin that patches the process it is imported into would stay in this one:
    those run through ``audit``. An exception the command does not turn into an exit status is
    raised again."""
    from typer.testing import CliRunner

    from audit.cli import app
    from audit.core import candidates

    plugins = [m.strip() for m in (env or {}).get(candidates.PLUGINS_ENV, "").split(",") if m.strip()]
    shell_plugins = os.environ.pop(candidates.PLUGINS_ENV, None)
    try:  # the adapters register in this process's registry first, so that they stay there afterwards
        candidates.load_adapters()
    finally:
        if shell_plugins is not None:
            os.environ[candidates.PLUGINS_ENV] = shell_plugins
    registry, cwd = candidates._REGISTRY, os.getcwd()
    candidates._REGISTRY = {k: c for k, c in registry.items() if c.forward.__module__ not in plugins}
    try:
        for name in plugins:
            sys.modules.pop(name, None)  # imported afresh, they register into the copy
        os.chdir(REPO)
        tempfile.tempdir = None
        owner = (
            SESSION_TEMPLATES[0].serving()
            if SESSION_TEMPLATES and set(env or ()) <= SESSION_TEMPLATES[0].unkeyed
            else None
        )
        with owner or nullcontext():
            done = CliRunner().invoke(app, list(args), env={"COLUMNS": "200", **(env or {})})
    finally:
        tempfile.tempdir = None
        os.chdir(cwd)
        candidates._REGISTRY = registry
        for name in plugins:
            sys.modules.pop(name, None)
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception
    return subprocess.CompletedProcess(["audit", *args], done.exit_code, done.stdout, done.stderr)


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its parent to reap it is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")
