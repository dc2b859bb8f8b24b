"""Kernel fingerprints end to end on the CPU: what a run records, that recording them does not
change a report's bits, and a run whose profiler fails."""

import json

from tests.helpers import audit

PLANTED = {"AUDIT_PLUGINS": "tests.plugins.planted"}


def _run(tmp_path, name: str, *args: str, env: dict | None = None) -> dict:
    out = tmp_path / name
    r = audit("run", "--device", "cpu", "--case", "1", "-q", "--out", str(out), *args, env=env)
    assert r.returncode == 0, r.stderr
    (path,) = out.glob("*.json")
    return json.loads(path.read_text())


def _without_kernels(report: dict) -> dict:
    results = {n: {k: v for k, v in e.items() if k != "kernels"} for n, e in report["results"].items()}
    return {k: v for k, v in report.items() if k not in ("kernel_names", "results")} | {"results": results}


def test_fingerprints_do_not_change_the_reports_bits(tmp_path):
    # order_follows_batch differs from the references, so the comparisons carry counts, ULPs and indices
    args = ("--op", "norm_modulate", "--repeats", "2")
    with_prints = _run(tmp_path, "with", *args, "--kernels", env=PLANTED)
    without = _run(tmp_path, "without", *args, "--no-kernels", env=PLANTED)
    assert "kernel_names" not in without and all("kernels" not in e for e in without["results"].values())
    assert any(
        not c["equal"]
        for cases in with_prints["results"]["order_follows_batch"].values()
        if isinstance(cases, dict) and "1" in cases and "out" in cases["1"]
        for c in cases["1"]["out"]
    )
    assert _without_kernels(with_prints) == _without_kernels(without)


def test_a_cpu_run_records_each_phases_operators(tmp_path):
    report = _run(tmp_path, "run", "--op", "gate_residual", "--candidate", "diffusers")
    names = report["kernel_names"]
    assert names == sorted(set(names))
    prints = report["results"]["diffusers"]["kernels"]["1"]
    forward = {names[i]: n for i, n in prints["forward"]}
    backward = {names[i]: n for i, n in prints["backward"]}
    assert {"aten::mul", "aten::add", "aten::index_select"} <= forward.keys()
    assert "AddBackward0" in backward and "AddBackward0" not in forward  # the phases are apart


def test_a_failing_profiler_is_reported_and_the_run_goes_on(tmp_path):
    env = {"AUDIT_PLUGINS": "tests.plugins.no_profiler"}
    report = _run(tmp_path, "run", "--op", "gate_residual", "--candidate", "diffusers", env=env)
    entry = report["results"]["diffusers"]
    assert entry["kernels"]["1"] == {
        "unavailable": "no kernel fingerprint: the profiled evaluation failed: "
        "RuntimeError: planted: the profiler cannot start"
    }
    assert entry["vs rl_kernel"]["1"]["out"][0]["equal"]  # compared all the same
    shown = audit("show", "--kernels", str(next((tmp_path / "run").glob("*.json"))))
    assert "the profiled evaluation failed" in shown.stdout
