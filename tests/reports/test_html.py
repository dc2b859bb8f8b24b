"""``audit report --html``: every report kind is drawn, the grid agrees with the verdicts, each
comparison's details are in the page, the page loads nothing, unreadable reports are named while
the rest render, and an unusable --html is exit 2 before anything is read."""

import json
import re
from html.parser import HTMLParser

import pytest
from typer.testing import CliRunner

from audit.cli import app
from reports.bitwise import pairs
from reports.diff import diff_sets
from reports.html import grids, render_html
from reports.io import load_each, load_set
from reports.kinds import KINDS, kind_of
from reports.tables import View
from tests.helpers import FIXTURES, REPO

H200 = REPO / "docs" / "evidence" / "h200"
EVIDENCE = [*sorted({p.parent for p in H200.rglob("h3_*.json")}), FIXTURES / "trajectory"]  # every committed report dir


class Rows(HTMLParser):
    """The rows of the page's filterable tables: (hidden, text, cell classes, cell titles), by table
    class (``ft`` or ``grid ft``), and the text of ``#shown``."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.rows: list[dict] = []
        self.shown = ""
        self._table: str | None = None
        self._in_body = self._in_shown = False
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "ft" in (a.get("class") or "").split():
            self._table = a["class"]
        elif tag == "tbody" and self._table:
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self.rows.append({"table": self._table, "hidden": "hidden" in a, "text": "", "classes": [], "titles": []})
        elif tag in ("td", "th") and self._in_body:
            self.rows[-1]["classes"].append(a.get("class") or "")
            self.rows[-1]["titles"].append(a.get("title") or "")
        elif tag == "span" and a.get("id") == "shown":
            self._in_shown = True

    def handle_endtag(self, tag):
        if tag == "table":
            self._table, self._in_body = None, False
        elif tag == "span":
            self._in_shown = False

    def handle_data(self, data):
        if self._in_body and self.rows:
            self.rows[-1]["text"] += data
        if self._in_shown:
            self.shown += data


@pytest.fixture(scope="module")
def evidence():
    loaded, problems = load_each(EVIDENCE)
    assert not problems
    return loaded


@pytest.fixture(scope="module")
def page(evidence) -> str:
    return render_html(evidence)


def test_every_kind_is_drawn_with_its_verdicts_coloured_by_its_statuses(evidence, page):
    assert {r.root.kind for _, r in evidence} == set(KINDS)
    verdict_rows = [r for r in Rows(page).rows if r["table"] == "ft" and len(r["classes"]) == 6]
    for _, report in evidence:
        kind = kind_of(report)
        for v in kind.verdicts(report.root):
            match = [r for r in verdict_rows if v.candidate in r["text"] and v.detail in r["text"]]
            assert match, (report.root.kind, v)
            assert any(r["classes"][4] == f"s-{kind.statuses[v.verdict]}" for r in match), v


def test_the_verdicts_come_first_then_each_report(evidence, page):
    at = page.index('id="verdicts"')
    assert all(page.index(f'id="r{i}"') > at for i in range(len(evidence)))


def test_the_grid_agrees_with_each_bitwise_verdict(evidence):
    checked = 0
    for _, report in evidence:
        if report.root.kind != "h3_bitwise_reuse":
            continue
        kind = kind_of(report)
        rows = [r for g in grids(kind.sections(report.root, View())) for r in g.rows]
        for v in kind.verdicts(report.root):
            mine = {
                r[0].text.rpartition(" · ")[2]: {c.status for c in r[1:]}
                for r in rows
                if r[0].text.startswith(f"{v.candidate} vs {v.reference} · ")
            }
            if v.reference is None:
                continue
            outs = set().union(*(s for t, s in mine.items() if t.startswith("out")))
            grads = set().union(*(s for t, s in mine.items() if t.startswith("d")))
            if v.verdict == "reusable":
                assert outs | grads == {"ok"}, v
            elif v.verdict == "forward only":  # some gradient differs, or the candidate has none
                assert "bad" not in outs and ("bad" in grads or not grads), v
            elif v.verdict == "differs":
                assert "bad" in outs, v
            elif v.verdict == "nondeterministic":
                assert "nd" in outs | grads, v
            checked += 1
    assert checked > 20


def test_a_chain_grid_has_a_row_per_length_and_compared_column(evidence):
    chain = next(r for _, r in evidence if r.root.kind == "h3_conditioning_chain_replay")
    rows = [r[0].text for g in grids(kind_of(chain).sections(chain.root, View())) for r in g.rows]
    assert any("chained vs provider" in r for r in rows) and any("isolated vs provider" in r for r in rows)


def _data(page: str) -> list[dict]:
    found = re.search(r'<script type="application/json" id="comparisons">(.*?)</script>', page, re.S)
    return json.loads(found.group(1))


def test_every_comparison_of_a_pair_is_in_the_page_with_its_histogram_and_first_index(evidence, page):
    shown = [{k: v for k, v in c.items() if k != "where"} for c in _data(page)]
    report = next(r for p, r in evidence if p.name == "h3_bitwise_reuse.norm_modulate.json")
    differing = 0
    for _, _, cases in pairs(report.root):
        for case in cases.values():
            for cmp in getattr(case, "by_tensor", dict)().values():
                assert cmp.model_dump(mode="json") in shown
                differing += cmp.ulp_hist is not None and cmp.first_differ is not None
    assert differing > 0


def test_the_page_loads_nothing_and_the_evidence_page_is_under_5_mb(page):
    assert not re.search(r"<link|<img|<iframe|\bsrc=|@import|url\(", page)
    assert len(page.encode()) <= 5 * 2**20


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_unreadable_reports_are_named_and_the_rest_render(tmp_path):
    good = tmp_path / "h3_bitwise_reuse.gate_residual.json"
    good.write_text((H200 / good.name).read_text())
    (tmp_path / "broken.json").write_text("{not json")
    out = tmp_path / "page.html"
    result = invoke("report", str(tmp_path), str(tmp_path / "absent.json"), "--html", str(out))
    assert result.exit_code == 2, result.output
    page = out.read_text()
    for name in ("broken.json", "absent.json"):
        assert name in page and f"not rendered: {tmp_path / name}" in result.output.replace("\n", "")
    assert 'id="r0"' in page and "gate_residual" in page and 'id="r1"' not in page


@pytest.mark.parametrize("html", ["/proc/audit.html", "page.htm", "{tmp}"])
def test_an_unusable_html_is_exit_2_before_anything_is_read(tmp_path, html):
    result = invoke("report", str(tmp_path / "absent.json"), "--html", html.format(tmp=tmp_path))
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: --html:"), result.output


def test_the_baseline_diff_is_in_the_page(tmp_path):
    out = tmp_path / "page.html"
    result = invoke("report", str(H200), "--baseline", str(FIXTURES), "--html", str(out))
    assert result.exit_code == 0, result.output
    found = diff_sets(load_set(FIXTURES), load_set(H200), old_name=str(FIXTURES), new_name=str(H200))
    page = out.read_text()
    assert 'id="diff"' in page and found.summary() in page
    assert all(c.candidate in page for o in found.ops for c in o.changes if c.kind == "regression")


def test_two_reports_with_one_key_against_a_baseline_are_exit_2(tmp_path):
    paths = [str(H200 / "parallel"), str(H200 / "parallel_nccl")]
    result = invoke("report", *paths, "--baseline", str(H200 / "parallel"), "--html", str(tmp_path / "p.html"))
    assert result.exit_code == 2 and "give one of them" in result.output
    assert not (tmp_path / "p.html").exists()
