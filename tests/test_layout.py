"""The package layout: rooms that depend on each other one way only, report commands that load no
torch (nor do the first checks of the computing commands), and names offered before torch that
match the registries."""

import ast
import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import REPO

PACKAGES = ("audit", "adapters", "modes", "reports", "rl_kernel_ops")
ROOMS = ("audit.cli", "audit.core", "audit.parent", "audit.worker")


def _node(module: str) -> str | None:
    """The room (``audit.cli``, ...) or top-level package a module belongs to; None outside the project."""
    for room in ROOMS:
        if module == room or module.startswith(room + "."):
            return room
    top = module.split(".")[0]
    return top if top in PACKAGES else None


def _imports(path: Path, module: str) -> set[str]:
    """Every module ``path`` imports, at any depth, except under ``if TYPE_CHECKING:``."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def dependencies() -> dict[str, set[str]]:
    """room or package -> the rooms and packages it imports."""
    graph: dict[str, set[str]] = {}
    for top in PACKAGES:
        for path in (REPO / top).rglob("*.py"):
            module = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
            src = _node(module)
            targets = {_node(m) for m in _imports(path, module)} - {None, src}
            if src == "audit":  # the package's own __init__/__main__: only the entry point
                continue
            graph.setdefault(src, set()).update(targets - {"audit"})
    return graph


def test_no_room_or_package_depends_on_itself_through_another():
    graph = dependencies()

    def reach(start: str, seen: set[str]) -> set[str]:
        for nxt in graph.get(start, ()):
            if nxt not in seen:
                seen.add(nxt)
                reach(nxt, seen)
        return seen

    cycles = {node: sorted(graph[node]) for node in graph if node in reach(node, set())}
    assert not cycles, f"import cycles through: {cycles}"
    assert graph["reports"] == set() and graph["modes"] == set()
    assert "audit.parent" not in graph["audit.worker"] and "audit.worker" not in graph["audit.parent"]
    assert not graph["audit.core"] & {"audit.cli", "audit.parent", "audit.worker", "adapters"}


# What a report command must not import: each costs start-up time (torch alone seconds), and none is
# needed to read, check or print a report. benchmarks/bench_startup.py measures the start-up.
LIBRARIES = ("torch", "numpy", "safetensors", "diffusers", "matplotlib", "adapters", "rl_kernel_ops")
HEAVY = (*LIBRARIES, "audit.parent", "audit.worker")


def test_the_report_commands_and_the_version_load_no_torch_nor_anything_heavy():
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from audit.cli import app\n"
        f"heavy = {HEAVY!r}\n"
        "fixture = 'tests/fixtures/h3_bitwise_reuse.gate_residual.json'\n"
        "commands = (['validate', fixture], ['show', fixture], ['diff', fixture, fixture], ['schema'], ['--version'])\n"
        "for argv in commands:\n"
        "    done = CliRunner().invoke(app, argv)\n"
        "    assert done.exit_code == 0, (argv, done.output)\n"
        "    loaded = sorted(m for m in sys.modules for h in heavy if m == h or m.startswith(h + '.'))\n"
        "    assert not loaded, (argv, loaded)\n"
        "print('nothing heavy')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "nothing heavy", done.stderr


def test_unusable_output_paths_and_baselines_exit_2_before_torch_is_imported(tmp_path):
    """A computing command checks --out, --junit, --baseline and the names it can check without
    torch first: a typo costs no torch import (nor a worker)."""
    (tmp_path / "baseline").mkdir()
    missing, empty = str(tmp_path / "missing"), str(tmp_path / "baseline")
    pair = ["--op", "gate_residual", "--layout", "sp_rows"]
    bad = [
        ["run", "--baseline", missing],
        ["run", "--op", "all", "--out", str(tmp_path / "one.json")],
        ["run", "--op", "nosuch"],
        ["run", "--fail-on", "regression"],
        ["prior-art", "--junit", str(tmp_path / "junit.txt")],
        ["prior-art", "--allow-missing", "rl_kernel"],
        ["chain", "--baseline", str(tmp_path / "missing.json")],
        ["trajectory", "--steps", "0"],
        ["parallel", *pair, "--baseline", missing],
        ["parallel", "--op", "gate_residual", "--layout", "nosuch"],
        ["run", "--baseline", empty],
    ]
    code = (
        "import json, sys\n"
        "from typer.testing import CliRunner\n"
        "from audit.cli import app\n"
        f"heavy = {LIBRARIES!r}\n"
        "found = []\n"
        f"for argv in {bad!r}:\n"
        "    done = CliRunner().invoke(app, argv)\n"
        "    loaded = sorted(m for m in sys.modules for h in heavy if m == h or m.startswith(h + '.'))\n"
        "    found.append([argv, done.exit_code, loaded, done.output.strip().splitlines()[-1:]])\n"
        "print(json.dumps(found))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for argv, status, loaded, last in json.loads(done.stdout):
        assert status == 2 and not loaded, (argv, status, loaded, last)


def test_the_names_offered_before_torch_are_the_registries():
    from audit.core.layouts import LAYOUTS
    from audit.core.names import LAYOUT_NAMES, OP_NAMES
    from audit.core.ops import OPS

    assert OP_NAMES == tuple(OPS)
    assert set(LAYOUT_NAMES) == {layout for _, layout in LAYOUTS}


def test_every_test_the_readme_names_exists():
    """The README's tables cite tests as evidence (``tests/x.py::test_y`` or a bare ``test_y``): a
    renamed or removed test must not leave a citation of nothing."""
    import re

    readme = (REPO / "README.md").read_text()
    defined = {
        node.name
        for path in (REPO / "tests").rglob("test_*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }
    cited = set(re.findall(r"\btest_[a-z0-9_]*[a-z0-9](?![\w.*])", readme))  # not a file, not a prefix
    assert cited, "the README cites no test"
    assert sorted(cited - defined) == []
    for prefix in re.findall(r"\b(test_[a-z0-9_]+)\*", readme):  # test_d6_*: some test of that prefix
        assert any(name.startswith(prefix) for name in defined), prefix
    for path, name in re.findall(r"(tests/[\w/]+\.py)::(test_\w+)", readme):
        assert name in (REPO / path).read_text(), f"{path}::{name}"
