"""Kernel fingerprints end to end on the CPU: what a run records, that recording them does not
change a report's bits, and a run whose profiler fails."""

import json

from tests.helpers import audit, audit_in_process

PLANTED = {"AUDIT_PLUGINS": "tests.plugins.planted"}


def _run(tmp_path, name: str, *args: str, env: dict | None = None, run=audit_in_process) -> dict:
    """``audit run`` into ``tmp_path/name``; ``run=audit`` where a plugin patches the process."""
    out = tmp_path / name
    r = run("run", "--device", "cpu", "--case", "1", "-q", "--out", str(out), *args, env=env)
    assert r.returncode == 0, r.stderr
    (path,) = out.glob("*.json")
    return json.loads(path.read_text())


def _without_kernels(report: dict) -> dict:
    """The report less what fingerprinting adds, and less its timing (measured, so never twice the same)."""
    results = {n: {k: v for k, v in e.items() if k != "kernels"} for n, e in report["results"].items()}
    return {k: v for k, v in report.items() if k not in ("kernel_names", "results", "timing")} | {"results": results}


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


def test_a_cpu_run_records_each_phases_operators(gate_residual_case_1):
    report = json.loads(gate_residual_case_1.read_text())  # run --op gate_residual --case 1 --candidate diffusers
    names = report["kernel_names"]
    assert names == sorted(set(names))
    prints = report["results"]["diffusers"]["kernels"]["1"]
    forward = {names[i]: n for i, n in prints["forward"]}
    backward = {names[i]: n for i, n in prints["backward"]}
    assert {"aten::mul", "aten::add", "aten::index_select"} <= forward.keys()
    assert "AddBackward0" in backward and "AddBackward0" not in forward  # the phases are apart
    switches = report["environment"]["dispatch"]["plain"]
    assert switches["cublas"] == "unavailable: CPU device" and switches["decisions"] == {}


def test_a_failing_profiler_is_reported_and_the_run_goes_on(tmp_path):
    env = {"AUDIT_PLUGINS": "tests.plugins.no_profiler"}
    report = _run(tmp_path, "run", "--op", "gate_residual", "--candidate", "diffusers", env=env, run=audit)
    entry = report["results"]["diffusers"]
    assert entry["kernels"]["1"] == {
        "unavailable": "no kernel fingerprint: the profiled evaluation failed: "
        "RuntimeError: planted: the profiler cannot start"
    }
    assert entry["vs rl_kernel"]["1"]["out"][0]["equal"]  # compared all the same
    shown = audit_in_process("show", "--kernels", str(next((tmp_path / "run").glob("*.json"))))
    assert "the profiled evaluation failed" in shown.stdout


SWITCH = "tests.plugins.kernel_switch"


def _switch_run(tmp_path, name: str, impl: str, *args: str, run=audit_in_process):
    """``audit run`` of the kernel_switch candidate into ``tmp_path/name``."""
    env = {"AUDIT_PLUGINS": SWITCH, "KERNEL_SWITCH_IMPL": impl}
    out = tmp_path / name
    r = run(
        "run", "--device", "cpu", "--op", "gate_residual", "--case", "1", "--candidate", "kernel_switch",
        "-q", "--out", str(out), *args, env=env,
    )  # fmt: skip
    return out, r


def test_equal_bits_through_other_operators_are_a_kernel_change_and_the_gate_fails_on_it(tmp_path):
    """The sub_neg run is gated against the add run: it fails on the kernel change, and the report
    it writes all the same is the one compared with add's."""
    add, r = _switch_run(tmp_path, "add", "add")
    assert r.returncode == 0, r.stderr
    sub_neg, gated = _switch_run(tmp_path, "sub_neg", "sub_neg", "--baseline", str(add), "--fail-on", "kernel-change")
    assert gated.returncode == 1, gated.stderr
    assert "2 kernel changes; first: gate_residual: kernel_switch case 1, forward: 1× aten::add -> " in gated.stderr
    for path in (add, sub_neg):  # bitwise equal to both references, output and gradients
        entry = json.loads(next(path.glob("*.json")).read_text())["results"]["kernel_switch"]
        cmps = [
            c
            for ref in ("vs diffusers", "vs rl_kernel")
            for c in (*entry[ref]["1"]["out"], *entry[ref]["1"]["grads"].values())
        ]
        assert len(cmps) == 8 and all(c["equal"] for c in cmps)

    found = json.loads(audit_in_process("diff", "-f", "json", str(add), str(sub_neg)).stdout)
    assert found["counts"]["kernel change"] == 2 and found["counts"]["regression"] == 0 and not found["regressed"]
    changes = {c["tensor"]: c for c in found["ops"][0]["changes"] if c["kind"] == "kernel change"}
    assert changes["forward"]["candidate"] == "kernel_switch" and changes["forward"]["case"] == "1"
    assert changes["forward"]["old"] == "1× aten::add" and changes["forward"]["new"] == "1× aten::neg, 1× aten::sub"
    assert "AddBackward0" in changes["backward"]["old"] and "SubBackward0" in changes["backward"]["new"]
    table = audit_in_process("diff", str(add), str(sub_neg))
    assert table.returncode == 0 and "kernel change" in table.stdout and "2 kernel changes" in table.stdout
    assert json.loads(audit_in_process("diff", "-f", "json", str(add), str(add)).stdout)["counts"]["kernel change"] == 0

    _, same = _switch_run(tmp_path, "same", "add", "--baseline", str(add), "--fail-on", "kernel-change")
    assert same.returncode == 0, same.stderr


def test_fail_on_kernel_change_needs_a_baseline_with_fingerprints(tmp_path):
    bare, r = _switch_run(tmp_path, "bare", "add", "--no-kernels")
    assert r.returncode == 0, r.stderr
    cases = [
        (("--baseline", str(bare), "--fail-on", "kernel-change"), "the baseline has no kernel fingerprints"),
        (("--fail-on", "kernel-change"), "--fail-on kernel-change needs --baseline"),
        (("--baseline", str(bare), "--fail-on", "kernel-change", "--no-kernels"), "drop --no-kernels"),
    ]
    for args, why in cases:
        _, r = _switch_run(tmp_path, "refused", "add", *args)
        assert r.returncode == 2 and why in r.stderr, (args, r.stderr)
        assert not (tmp_path / "refused").exists()  # refused before any work
