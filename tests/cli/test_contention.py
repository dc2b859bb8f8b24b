"""--contention: refused, before any work, where it cannot apply; recorded in the report."""

import pytest
from typer.testing import CliRunner

from audit.cli import app
from tests.helpers import SEEDS, load
from reports.io import parse_report
from reports.render import View, sections


@pytest.mark.parametrize(
    "args, why",
    [
        (
            ("run", "--repeats", "2"),
            "--contention needs a CUDA device (it loads a side CUDA stream); this run is on cpu",
        ),
        (
            ("prior-art", "--quick"),
            "--contention needs a CUDA device (it loads a side CUDA stream); this run is on cpu",
        ),
        (("run", "--repeats", "1"), "--contention loads the repeats: it needs --repeats 2 or more"),
    ],
)
def test_contention_is_refused_in_one_line_before_any_work(tmp_path, args, why):
    out = tmp_path / "out"
    r = CliRunner().invoke(
        app,
        [*args, "--op", "gate_residual", "--device", "cpu", "--contention", "--out", str(out)],
        env={"COLUMNS": "250"},
    )
    assert r.exit_code == 2 and r.stderr.strip() == f"error: {why}"
    assert not out.exists()


def test_a_report_run_under_contention_says_so():
    for path, says in ((SEEDS[1], "repeats under GPU contention"), (SEEDS[4], "checks under GPU contention")):
        data = load(path) | {"contention": True}
        report = parse_report(data, path.name)
        assert report.model_dump(mode="json") == data
        assert says in sections(report, View())[0].note
        assert says not in sections(parse_report(load(path), path.name), View())[0].note
