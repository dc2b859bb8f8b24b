"""The HTML report in a real browser: headless Chromium (Debian's ``chromium`` package) loads the
page of the committed H200 evidence, runs its script, filters it from the URL fragment, and takes a
screenshot, kept under ``$AUDIT_SCREENSHOTS`` when set (CI uploads that folder), else under the
test's temporary directory. Without Chromium the tests skip, saying so."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from reports.html import render_html
from reports.io import load_each
from tests.reports.test_html import EVIDENCE, Rows

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no chromium on PATH: the browser tests need Debian's chromium package "
    "(apt-get install chromium; .ci/run installs it)",
)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    loaded, problems = load_each(EVIDENCE)
    assert not problems
    path = tmp_path_factory.mktemp("html") / "h200.html"
    path.write_text(render_html(loaded, title="H200 evidence"))
    return path


def chromium(tmp_path: Path, *args: str) -> str:
    """Chromium run headless on its own profile in ``tmp_path``; its stdout."""
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_page_renders_with_every_row_shown(page, tmp_path):
    rows = Rows(chromium(tmp_path, "--dump-dom", page.as_uri()))
    assert rows.rows and not any(r["hidden"] for r in rows.rows)
    assert rows.shown == f"{len(rows.rows)} of {len(rows.rows)} rows"  # the script ran


def test_the_url_fragment_filters_rows_by_text_and_status(page, tmp_path):
    rows = Rows(chromium(tmp_path, "--dump-dom", page.as_uri() + "#q=sglang&status=bad"))
    shown = [r for r in rows.rows if not r["hidden"]]
    assert shown and len(shown) < len(rows.rows)
    for r in rows.rows:
        text = (r["text"] + " ".join(r["titles"])).lower()
        matches = "sglang" in text and any("s-bad" in c.split() for c in r["classes"])
        assert r["hidden"] != matches, r
    assert rows.shown == f"{len(shown)} of {len(rows.rows)} rows"


def test_a_screenshot_is_kept(page, tmp_path):
    folder = Path(os.environ.get("AUDIT_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    shot = folder / "h200_report.png"
    chromium(tmp_path, "--hide-scrollbars", "--window-size=1400,1100", f"--screenshot={shot}", page.as_uri())
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 50_000  # a blank page of this size compresses to a few kB
