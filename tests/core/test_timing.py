"""The timing phases (``audit.core.timing``): exclusive, so a process's phases add up."""

from __future__ import annotations

import time

from audit.core import timing
from audit.parent.runner import Outcome


def test_a_phase_entered_inside_another_pauses_it():
    before, t0 = timing.spent(), time.perf_counter()
    with timing.phase("setup"):
        time.sleep(0.05)
        with timing.phase("compute"):
            time.sleep(0.1)
        with timing.phase("setup"):  # re-entering the same phase counts once
            time.sleep(0.05)
    elapsed, after = time.perf_counter() - t0, timing.spent()
    setup, compute = (after[p] - before[p] for p in ("setup", "compute"))
    assert setup >= 0.1 and compute >= 0.1, (setup, compute)
    assert setup + compute <= elapsed  # every second counted once


def test_an_open_phase_counts_up_to_now():
    with timing.phase("inputs"):
        start = timing.spent()["inputs"]
        time.sleep(0.05)
        assert timing.spent()["inputs"] - start >= 0.05


def test_a_process_that_died_adds_wall_time_only():
    outcome = Outcome()
    outcome.add_process("plain", 2.0, {"imports": 0.5, "compute": 1.4, "exit": 0.1})
    outcome.add_process("plain", 3.0, None)
    t = outcome.timing["plain"]
    assert t["processes"] == 2 and t["wall"] == 5.0
    assert t["phases"]["compute"] == 1.4 and sum(t["phases"].values()) == 2.0
    assert list(t["phases"]) == list(timing.PHASES)
