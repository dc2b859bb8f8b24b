"""`audit plot` of a bitwise report: any difference is visibly not equal, and what could not run
is in the picture, grey, with its reason."""

import copy

from matplotlib.colors import to_rgb
from typer.testing import CliRunner

from audit.cli import app
from tests.helpers import SEEDS, load
from reports.io import parse_report
from reports.plot import GREEN, GREY, GridCell, bitwise_grids, cell_colour

GATE = next(p for p in SEEDS if p.name == "h3_bitwise_reuse.gate_residual.json")


def test_any_difference_is_coloured_unlike_equal():
    assert cell_colour(GridCell(0.0)) == GREEN
    for fraction in (1e-12, 20_559 / 1_409_286_144, 0.025, 0.5, 1.0):  # 20,559 of 1.4e9 was "0.0 %", green
        r, g, b = to_rgb(cell_colour(GridCell(fraction, differ=1)))
        assert r > g and r > b, (fraction, (r, g, b))  # yellow to red, never green
    few, many = to_rgb(cell_colour(GridCell(1e-6, 1))), to_rgb(cell_colour(GridCell(0.5, 1)))
    assert few != many  # the log scale tells a few differing elements from half of them


def test_unavailable_candidates_and_cases_are_grey_with_their_reason():
    data = copy.deepcopy(load(GATE))
    data["results"]["liger"] = {"unavailable": "liger_kernel is not installed"}
    for name, ref in (("diffusers", "rl_kernel"), ("rl_kernel", "diffusers")):
        data["results"][name][f"vs {ref}"]["4097"] = {"unavailable": "OutOfMemoryError: planted"}
    grids = bitwise_grids(parse_report(data).root)
    for vs in ("vs rl_kernel", "vs diffusers"):
        assert {c.reason for c in grids[vs]["liger"].values()} == {"liger_kernel is not installed"}
    cell = grids["vs rl_kernel"]["diffusers"]["4097"]
    assert cell.fraction is None and cell.reason == "OutOfMemoryError: planted" and cell_colour(cell) == GREY
    assert grids["vs rl_kernel"]["diffusers"]["257"].fraction == 35_402 / (3 * 1_381_632 + 48_384)


def test_plot_writes_a_png(tmp_path):
    out = tmp_path / "g.png"
    done = CliRunner().invoke(app, ["plot", str(GATE), "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
