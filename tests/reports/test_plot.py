"""`audit plot` of a bitwise report agrees with its verdicts: the output and each gradient have their
own cells, each pair is drawn once, any difference is visibly not equal and 2 % looks unlike 98 %,
non-repeatable cells are marked, what could not run is grey with its reason, and no text overlaps
another."""

import copy
import itertools

import matplotlib.pyplot as plt
import pytest
from matplotlib.colors import to_rgb
from matplotlib.text import Text
from typer.testing import CliRunner

from audit.cli import app
from reports.bitwise import pairs
from reports.io import load_report, parse_report
from reports.plot import GREEN, GREY, ND, GridCell, bitwise_grids, cell_colour, cell_text, draw_bitwise
from tests.helpers import FIXTURES, REPO, load

GATE = FIXTURES / "h3_bitwise_reuse.gate_residual.json"
H200 = REPO / "docs" / "evidence" / "h200"
BITWISE = sorted([*FIXTURES.glob("h3_bitwise_reuse.*.json"), *H200.glob("h3_bitwise_reuse.*.json")])


def test_the_b200_forward_only_pair_has_equal_output_cells():
    (grid,) = bitwise_grids(load_report(GATE).root)
    assert (grid.candidate, grid.reference, grid.verdict) == ("diffusers", "rl_kernel", "forward only")
    assert grid.tensors == ["out", "dres", "dy", "dgate"]
    colours = {key: cell_colour(cell) for key, cell in grid.cells.items()}
    assert all(colours[(t, case)] == GREEN for t in ("out", "dres", "dy") for case in grid.cases)
    assert colours[("dgate", "1")] == GREEN
    assert all(colours[("dgate", case)] not in (GREEN, ND, GREY) for case in ("257", "4097", "32768"))
    assert grid.cells[("dgate", "257")] == GridCell(35_402 / 48_384, 35_402, None)


@pytest.mark.parametrize("path", BITWISE, ids=lambda p: str(p.relative_to(REPO)))
def test_every_grid_agrees_with_its_verdict_and_each_pair_is_drawn_once(path):
    report = load_report(path).root
    grids = bitwise_grids(report)
    assert len(grids) == len(pairs(report)) == len({frozenset((g.candidate, g.reference)) for g in grids})
    for g in grids:
        colour = {key: cell_colour(cell) for key, cell in g.cells.items()}
        outputs = [c for (t, _), c in colour.items() if t.startswith("out")]
        if g.verdict == "reusable":
            assert set(colour.values()) == {GREEN}
        if g.verdict == "forward only":
            assert set(outputs) == {GREEN} and set(colour.values()) != {GREEN}
        if g.verdict == "differs":
            assert any(c not in (GREEN, ND, GREY) for c in outputs)
        if g.verdict == "nondeterministic":
            assert ND in colour.values()


def test_any_difference_is_coloured_unlike_equal_and_two_percent_unlike_ninety_eight():
    assert cell_colour(GridCell(0.0)) == GREEN
    for fraction in (1e-12, 20_559 / 1_409_286_144, 0.02, 0.5, 0.98, 1.0):
        r, g, b = to_rgb(cell_colour(GridCell(fraction, differ=1)))
        assert r >= g and r > b, (fraction, (r, g, b))  # pale yellow to dark red, never green
    few, most = (to_rgb(cell_colour(GridCell(f, differ=1))) for f in (0.02, 0.98))
    assert sum((a - b) ** 2 for a, b in zip(few, most)) ** 0.5 > 0.5, (few, most)


def test_non_repeatable_cells_are_marked():
    (grid,) = bitwise_grids(load_report(H200 / "h3_bitwise_reuse.gate_residual.json").root)
    cell = grid.cells[("dgate", "257")]
    assert cell.repeatable is False and cell_colour(cell) == ND
    assert cell_text(cell).startswith("not repeatable\n")
    assert cell_colour(grid.cells[("out", "257")]) == GREEN


def _planted():
    data = copy.deepcopy(load(GATE))
    data["results"]["liger"] = {"unavailable": "liger_kernel is not installed"}
    for name, ref in (("diffusers", "rl_kernel"), ("rl_kernel", "diffusers")):  # both directions agree
        data["results"][name][f"vs {ref}"]["4097"] = {"unavailable": "OutOfMemoryError: planted"}
    return parse_report(data).root


def test_what_did_not_run_is_grey_with_its_reason():
    report = _planted()
    (grid,) = bitwise_grids(report)
    cell = grid.cells[("out", "4097")]
    assert cell.fraction is None and cell.reason == "OutOfMemoryError: planted" and cell_colour(cell) == GREY
    fig = draw_bitwise(report)
    said = "\n".join(t.get_text() for t in fig.findobj(Text))
    plt.close(fig)
    assert "liger: liger_kernel is not installed" in said
    assert "diffusers vs rl_kernel, case 4097: OutOfMemoryError: planted" in said


@pytest.mark.parametrize("report", ["planted", "norm_modulate"])
def test_no_text_overlaps_another(report):
    found = _planted() if report == "planted" else load_report(H200 / "h3_bitwise_reuse.norm_modulate.json").root
    fig = draw_bitwise(found)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [
        (t.get_text(), t.get_window_extent(renderer))
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and (t.axes is None or t.axes.axison)
    ]
    plt.close(fig)
    clashes = [(a, b) for (a, x), (b, y) in itertools.combinations(boxes, 2) if x.overlaps(y)]
    assert not clashes, clashes[:5]


def test_plot_writes_a_png(tmp_path):
    out = tmp_path / "g.png"
    done = CliRunner().invoke(app, ["plot", str(GATE), "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
