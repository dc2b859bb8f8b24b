"""``audit selftest`` passes with the real comparator and fails when the comparator is broken on
purpose (a plugin that makes it blind to the last mantissa bit)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import REPO, alive, audit, audit_in_process


def test_the_selftest_holds_with_the_real_comparator():
    done = audit_in_process("selftest")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("selftest: ") and last.endswith(" properties hold")
    assert "MISSED" not in done.stdout and "sign bit flipped" in done.stdout and "3 ULPs off" in done.stdout


def test_the_selftest_fails_when_the_comparator_ignores_the_last_mantissa_bit():
    done = audit("selftest", env={"AUDIT_PLUGINS": "tests.plugins.blunt_comparator"})
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    missed = [line for line in done.stdout.splitlines() if line.startswith("MISSED")]
    assert missed and all("last mantissa bit flipped" in line or "sign bit" in line or "ULP" in line for line in missed)
    assert any("out.0: last mantissa bit flipped" in line for line in missed)
    assert "missed" in done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_the_selftest_and_its_worker(sig, status, tmp_path):
    mark = f"SELFTEST_SIGNAL_TEST={tmp_path}"  # finds this run's worker, not another selftest's
    proc = subprocess.Popen(
        [sys.executable, "-m", "audit", "selftest"],
        cwd=REPO,
        env={**os.environ, "SELFTEST_SIGNAL_TEST": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # Ctrl-C as a terminal delivers it
    )
    deadline = time.monotonic() + 120
    while not (workers := _selftest_workers(mark)):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
        time.sleep(0.1)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == status, stderr
    assert "the selftest's worker stopped" in stderr
    time.sleep(0.5)
    assert not [pid for pid in workers if alive(pid)]


def _selftest_workers(mark: str) -> list[int]:
    """This test's selftest workers: their command line and the test's variable, which they inherit."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            mine = mark.encode() + b"\0" in (entry / "environ").read_bytes() + b"\0"
            if mine and b"audit.worker.selftest" in (entry / "cmdline").read_bytes() and alive(int(entry.name)):
                found.append(int(entry.name))
        except OSError:
            continue
    return found
