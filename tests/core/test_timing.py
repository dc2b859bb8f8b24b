"""The timing phases (``audit.core.timing``): exclusive, so a process's phases add up."""

from __future__ import annotations

import os
import threading
import time

import pytest

from audit.core import timing
from audit.core.events import Waiting
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


def test_a_worker_that_ended_before_its_turn_waited_until_then():
    """The runner completes a process's phases so that they add up to its wall time: a worker that
    sent its last event 3 s after its spawn, its turn at 10 s and its reaping at 10.5 s waited 7 s
    and took 0.5 s to be reaped; one that computed after its turn waited nothing more."""
    from audit.parent.runner import _with_exit

    sent = dict.fromkeys(timing.PHASES[:-1], 0.0) | {"start": 0.1, "imports": 2.0, "setup": 0.9}
    early = _with_exit(sent, spawned=100.0, turn=110.0, ended=110.5)
    assert early["waiting"] == pytest.approx(7.0) and early["exit"] == pytest.approx(0.5)
    assert sum(early.values()) == pytest.approx(10.5)
    late = _with_exit(sent, spawned=100.0, turn=101.0, ended=103.2)
    assert late["waiting"] == 0.0 and late["exit"] == pytest.approx(0.2)
    assert sum(late.values()) == pytest.approx(3.2)
    assert _with_exit(None, spawned=100.0, turn=101.0, ended=103.2) is None


def _runner_side(write: int, give: bool) -> None:
    """What the runner does with a worker's turn pipe: give the turn (one byte), then close it."""
    if give:
        os.write(write, b"1")
    os.close(write)


def test_a_worker_waits_for_its_turn_and_stops_when_the_runner_is_gone():
    from audit import worker

    for give in (True, False):
        read, write = os.pipe()
        worker.hold_turn(read)
        threading.Timer(0.2, _runner_side, (write, give)).start()
        before, sent = timing.spent()["waiting"], []
        if give:
            assert worker.await_turn(sent.append) is True
            assert timing.spent()["waiting"] - before >= 0.15 and sent == [Waiting()]
            assert worker.await_turn(sent.append) is False and len(sent) == 1  # once given, the turn stays
        else:
            with pytest.raises(RuntimeError, match="closed this worker's turn pipe"):
                worker.await_turn(sent.append)
