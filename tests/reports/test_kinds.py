"""Every registered report kind provides every facet, on a real report of that kind; the
``reports`` package has no import cycle and loads no torch."""

import ast
import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import reports.plot
from audit.cli import app
from tests.helpers import FIXTURES, load
from reports.diff import diff_sets
from reports.io import load_report, load_set, parse_report
from reports.kinds import KINDS, Report, kind_of
from reports.render import draw_markdown, draw_rich
from reports.tables import View
from reports.verdict import Status

from tests.helpers import REPO

H200 = REPO / "docs" / "evidence" / "h200"
REAL = {  # one committed report of each kind
    "h3_bitwise_reuse": FIXTURES / "h3_bitwise_reuse.gate_residual.json",
    "h3_prior_art": FIXTURES / "h3_prior_art.adaln_projection.json",
    "h3_conditioning_chain_replay": H200 / "chain" / "h3_conditioning_chain_replay.liger.json",
    "h3_parallel": H200 / "parallel" / "h3_parallel.norm_modulate.sp_rows.json",
    "h3_denoising_trajectory": FIXTURES / "trajectory" / "h3_denoising_trajectory.planted.json",
}
STATUSES = set(Status.__args__)


def test_every_registered_kind_has_a_real_report_here():
    assert set(REAL) == set(KINDS)
    assert [k.name for k in KINDS.values()] == list(KINDS)


@pytest.mark.parametrize("name", list(KINDS))
def test_a_kind_provides_every_facet(name):
    kind, path = KINDS[name], REAL[name]
    report = load_report(path)
    assert kind_of(report) is kind and report.root.kind == kind.name
    assert isinstance(report.root, kind.model)
    drawn = kind.sections(report.root, View())
    assert drawn and draw_markdown(drawn).startswith("### ") and draw_rich(drawn).renderables
    found = kind.verdicts(report.root)
    assert found and {v.verdict for v in found} <= set(kind.statuses)
    assert set(kind.statuses.values()) <= STATUSES and "na" in kind.statuses.values()
    assert kind.key(report.root)[0] == name
    same = diff_sets(load_set(path), load_set(path))
    assert [o.kind for o in same.ops] == [name]
    assert not any(o.changes or o.appeared or o.lost or o.environment for o in same.ops) and not same.regressed
    assert isinstance(kind.problem(report.root), dict)
    assert kind.ran(report.root) and kind.ran(report.root) <= set(kind.candidates(report.root))
    assert kind.plot is None or callable(getattr(reports.plot, kind.plot))
    names = kind.candidates(report.root)
    assert names
    for candidate in names:
        done = CliRunner().invoke(app, ["show", "--format", "markdown", "--candidate", candidate, str(path)])
        assert done.exit_code == 0, done.output
    refused = CliRunner().invoke(app, ["show", "--candidate", "no-such-candidate", str(path)])
    assert refused.exit_code == 2 and "no candidate" in refused.stderr


def test_show_candidate_works_on_a_parallel_report():
    done = CliRunner().invoke(app, ["show", "--candidate", "diffusers", str(REAL["h3_parallel"])])
    assert done.exit_code == 0 and "diffusers" in done.stdout


def test_a_parallel_bitwise_verdict_is_no_difference():
    """``bitwise`` passes for a parallel report, as ``reusable`` does for a bitwise one."""
    data = load(REAL["h3_parallel"])
    kind = KINDS["h3_parallel"]
    bitwise = [v.candidate for v in kind.verdicts(parse_report(data).root) if v.verdict == "bitwise"]
    only = copy.deepcopy(data)
    only["results"] = {name: data["results"][name] for name in bitwise}
    report = parse_report(only)
    assert {v.verdict for v in kind.verdicts(report.root)} == {"bitwise"}
    assert not kind.any_difference(report.root)
    assert kind.any_difference(parse_report(data).root)  # its other candidates differ


def test_every_chain_replay_has_a_verdict_read_from_drop_in():
    report = load_report(REAL["h3_conditioning_chain_replay"]).root
    found = KINDS["h3_conditioning_chain_replay"].verdicts(report)
    replays = [(m, n, r) for m, mode in report.results.items() for n, r in mode.lengths.items()]
    assert len(found) == len(replays)
    for v, (mode, length, replay) in zip(found, replays):
        assert v.mode == mode and v.detail.startswith(f"length {length}")
        assert (v.verdict == "drifts") == (replay.first_drift is not None)
        assert (v.verdict == "drop-in") == (replay.drop_in.forward and replay.drop_in.backward is not False)


def test_the_report_union_is_built_from_the_registry():
    members = Report.model_json_schema()["oneOf"]
    assert [m["$ref"].rsplit("/", 1)[1] for m in members] == [k.model.__name__ for k in KINDS.values()]


def _imports(path: Path) -> set[str]:
    """The modules of ``reports`` and of other top-level packages that a module imports anywhere."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = f"reports.{node.module or ''}".rstrip(".") if node.level else node.module
            found |= {f"{base}.{a.name}" if base == "reports" else base for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


def test_reports_has_no_import_cycle_and_imports_nothing_else_of_the_project():
    modules = {f"reports.{p.stem}": _imports(p) for p in (REPO / "reports").glob("*.py") if p.stem != "__init__"}
    for name, imported in modules.items():
        assert not {i.split(".")[0] for i in imported} & {"audit", "modes", "adapters", "torch"}, name
    graph = {name: {i for i in imported if i in modules} for name, imported in modules.items()}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in graph[start])

    assert [name for name in graph if reaches(name, name, set())] == []


def test_the_report_commands_modules_load_no_torch():
    code = (
        "import sys, reports.kinds, reports.io, reports.diff, reports.render, reports.verdict; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'audit', 'modes'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", "import json; " + code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == []
