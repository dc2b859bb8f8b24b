"""The prior-art checks on the CPU: the counts follow the definitions, and the verdict tells a
planted batch-dependent reduction from a fixed-order one."""

import os
import subprocess
import sys

import torch

import tests.plugins.planted  # noqa: F401  (registers the planted candidates)
from audit.core.candidates import get_candidate
from audit.core.ops import get_op
from audit.worker.prior_art import Checker, check_candidate
from audit.core.prior_art_sizes import Sizes, positions, probe_rows, sub_batch_starts, sweep_sizes
from modes import MODES
from reports.io import load_report
from tests.helpers import REPO

TINY = Sizes(
    full_batch=16, sub_batch_sizes=(1, 3, 8), accuracy=(1, 2), all_rows=(2, 3), sweep_rows=8, warmup=0, samples=1
)


def test_example_report_counts_follow_the_definitions():
    assert sum(len(sub_batch_starts(4096, s)) for s in (1, 7, 1024, 2048)) == 512 + 512 + 4 + 2
    sizes = sweep_sizes(2048)
    assert sizes[:10] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 15] and sizes[-2:] == [2047, 2048]
    assert probe_rows(2048) == [0, 259, 515, 771, 1027, 1283, 1539, 2047]
    per_probe = sum(len(positions(m)) for m in sizes) + 1  # + the reversed batch
    assert 3 * 8 * per_probe == 2256


def test_tiny_configuration_counts_match_hand_computed_ones():
    c = get_candidate("norm_modulate", "fixed_order")
    result = check_candidate(
        Checker(c, get_op("norm_modulate"), MODES["plain"], torch.device("cpu"), TINY), lambda check, so_far: None
    )
    bi = result["batch_invariance"]
    assert {n: r["rows"] for n, r in bi["all_rows"].items()} == {"2": 6, "3": 9}
    # sizes 1, 3, 8 over 16 rows: 16 + 5 + 2 sub-batches per seed, two seeds
    assert bi["full_vs_sub_batches"]["sub_batches"] == 2 * (16 + 5 + 2)
    # n = 8: sizes 1..8; probes 0, 4, 5, 6, 7; positions 1 + 2 + 6 * 3, plus the reversed batch
    assert bi["batch_size_sweep"]["batch_sizes"] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert bi["batch_size_sweep"]["probe_rows"] == [0, 4, 5, 6, 7]
    assert bi["batch_size_sweep"]["comparisons"] == 3 * 5 * (1 + 2 + 6 * 3 + 1)
    assert set(result["accuracy_latency"]) == {"1", "2"}
    assert set(result["accuracy_latency"]["2"]["grad_rel_err"]) == {"x", "w"}


def test_verdict_passes_a_fixed_order_reduction():
    c = get_candidate("norm_modulate", "fixed_order")
    bi = check_candidate(
        Checker(c, get_op("norm_modulate"), MODES["plain"], torch.device("cpu"), TINY), lambda *a: None
    )["batch_invariance"]
    assert bi["batch_invariant"] is True
    assert bi["batch_size_sweep"]["differ"] == 0 and bi["params_repeatable"] is True


def test_verdict_catches_a_reduction_whose_order_follows_the_batch_size():
    c = get_candidate("norm_modulate", "order_follows_batch")
    result = check_candidate(
        Checker(c, get_op("norm_modulate"), MODES["plain"], torch.device("cpu"), TINY), lambda *a: None
    )
    bi = result["batch_invariance"]
    assert bi["batch_invariant"] is False
    # alone (1 row, odd) vs in a batch of 2 (even): the sum order differs
    assert bi["all_rows"]["2"]["fwd_differ"] > 0
    assert bi["batch_size_sweep"]["differ"] > 0
    first = bi["batch_size_sweep"]["first_failures"][0]
    assert first["batch"] % 2 == 0 and len(bi["batch_size_sweep"]["first_failures"]) <= 8
    # a wrong sum order is still accurate: the verdict is about bits, not error
    assert result["accuracy_latency"]["2"]["fwd_rel_err"] < 1e-2


def test_prior_art_command_quick_writes_a_valid_report(tmp_path):
    out = tmp_path / "pa.json"
    done = subprocess.run(
        [
            sys.executable,
            *(
                "-m audit prior-art --op norm_modulate --quick --device cpu --candidate "
                "order_follows_batch --candidate torch_rms_norm"
            ).split(),
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "AUDIT_PLUGINS": "tests.plugins.planted", "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    report = load_report(out).root
    assert report.quick is True and list(report.results) == ["plain"]
    plain = report.results["plain"]
    assert set(plain) == {"order_follows_batch", "torch_rms_norm"}
    assert plain["order_follows_batch"].batch_invariance.batch_invariant is False
    assert plain["torch_rms_norm"].has_backward is True
    assert "order_follows_batch" in done.stdout
