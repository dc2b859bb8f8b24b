"""Output that reads at any width: every committed report of every kind, and ``audit list``, drawn
80 and 120 columns wide, keep every cell's text (a cell may wrap across lines), crop nothing and
add no ellipsis."""

import io
import json
import os
import re
import subprocess
import sys

import pytest
from rich.cells import cell_len
from rich.console import Console

from reports.io import load_report
from reports.kinds import kind_names
from reports.render import draw_rich, sections
from reports.tables import Cell, Section
from tests.helpers import FIXTURES, REPO

WIDTHS = (80, 120)
H200 = REPO / "docs" / "evidence" / "h200"
REPORTS = sorted(
    p
    for p in [*FIXTURES.glob("*.json"), *H200.glob("*.json"), *(H200 / "chain").glob("*.json")]
    + [*(H200 / "parallel").glob("*.json")]
    if json.loads(p.read_text()).get("kind") in kind_names()
)
BOX = "│┃"  # the vertical borders of a table's body and head


def squash(text: str) -> str:
    """``text`` without whitespace: a cell wrapped across lines reads the same."""
    return re.sub(r"\s+", "", text)


def split_output(text: str) -> tuple[str, list[list[str]]]:
    """The lines outside tables, and per table each column's text, top to bottom."""
    flow, tables, table = [], [], None
    for line in text.splitlines():
        if line[:1] in "┏┃┡│└┌├╇┗╭":
            if table is None:
                table = []
                tables.append(table)
            if line[0] in BOX:
                parts = re.split(f"[{BOX}]", line)[1:-1]
                table.extend([] for _ in range(len(parts) - len(table)))
                for column, part in zip(table, parts):
                    column.append(part)
        else:
            table = None
            flow.append(line)
    return "\n".join(flow), [["\n".join(column) for column in t] for t in tables]


def assert_every_cell_shown(drawn: list[Section], text: str, width: int) -> None:
    """Every title, note and cell of ``drawn`` is in ``text``, each cell in its own table, and so is
    every column name that labels some text; no line is wider than ``width``, nothing ends in …."""
    assert "…" not in text
    too_wide = [line for line in text.splitlines() if cell_len(line) > width]
    assert not too_wide, too_wide[:3]
    flow, tables = split_output(text)
    with_columns = [s for s in drawn if s.columns]
    assert len(tables) == len(with_columns)
    for s in drawn:
        for words in (s.title, s.note):
            assert squash(words) in squash(flow), words
    for s, columns in zip(with_columns, tables):
        shown = [squash(c) for c in columns]
        labels = [col for i, col in enumerate(s.columns) if any(i < len(row) and row[i].text for row in s.rows)]
        for cell in [*labels, *(c.text for row in s.rows for c in row)]:
            assert any(squash(cell) in column for column in shown), (s.title, cell)


def render(drawn: list[Section], width: int) -> str:
    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(draw_rich(drawn))
    return out.getvalue()


def test_every_kind_is_here():
    assert {load_report(p).root.kind for p in REPORTS} == {
        "h3_bitwise_reuse",
        "h3_prior_art",
        "h3_conditioning_chain_replay",
        "h3_parallel",
    }


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("path", REPORTS, ids=lambda p: str(p.relative_to(REPO)))
def test_a_report_keeps_every_cell(path, width):
    drawn = sections(load_report(path))
    assert_every_cell_shown(drawn, render(drawn, width), width)


LIST_SECTIONS = """
import dataclasses, json, torch
from audit.cli import checks
from audit.cli.environments import PROBE_TIMEOUT_S, list_sections
checks.load_adapters()
drawn = list_sections(torch.device("cpu"), checks.environments(None, None, None), timeout=PROBE_TIMEOUT_S)
print(json.dumps([dataclasses.asdict(s) for s in drawn]))
"""  # in a fresh process, as audit list runs: the candidates other tests register here are not there


def run_here(*args: str, width: int) -> str:
    env = {**os.environ, "COLUMNS": str(width)}
    done = subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def list_drawn() -> list[Section]:
    """What ``audit list --device cpu`` draws, as sections (whatever the width)."""
    return [
        Section(**{**s, "rows": [[Cell(**c) for c in row] for row in s["rows"]]})
        for s in json.loads(run_here("-c", LIST_SECTIONS, width=WIDTHS[0]))
    ]


@pytest.mark.parametrize("width", WIDTHS)
def test_audit_list_keeps_every_cell(width, list_drawn):
    assert_every_cell_shown(list_drawn, run_here("-m", "audit", "list", "--device", "cpu", width=width), width)
