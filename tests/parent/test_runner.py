"""The runner end to end, in real subprocesses, on the CPU."""

import json

import pytest

from audit.core.timing import PHASES
from modes import MODES, SGLANG_DEEPGEMM
from reports.io import load_report

from tests.helpers import REPO, audit, audit_in_process

FAULTY = {"AUDIT_PLUGINS": "tests.plugins.faulty"}


def test_a_crashing_candidate_is_isolated_the_report_still_written_and_the_differ_gate_fails(tmp_path):
    out = tmp_path / "r.json"
    done = audit_in_process(
        *"run --op gate_residual --device cpu --case 2 --case 5 --candidate crashes --candidate raises".split(),
        *("--fail-on", "differ", "--out", str(out), "-q"),
        env={**FAULTY, "FAULTY_CRASH_CASE": "4"},
    )
    assert done.returncode == 1, done.stderr  # equal where it ran is not bitwise clean: case 5 never ran
    stderr = " ".join(done.stderr.split())
    assert (
        "the requested candidate crashes did not run everywhere: crashes vs diffusers: out, dres, dy, dgate bitwise "
        "equal in cases 2; case 5 unavailable: mode plain process exited with status 3 while running case 5: --fail-on"
    ) in stderr
    assert "the requested candidate raises did not run" in stderr
    results = load_report(out).root.model_dump(mode="json")["results"]
    for ref in ("diffusers", "rl_kernel"):  # case 2 ran before the crash and stands
        assert results["crashes"][f"vs {ref}"]["2"]["out"][0]["equal"] is True
        crashed = results["crashes"][f"vs {ref}"]["5"]["unavailable"]
        assert "exited with status 3" in crashed and "case 5" in crashed
    assert results["raises"]["vs diffusers"]["2"] == {"unavailable": "RuntimeError: planted failure"}
    assert results["raises"]["vs rl_kernel"]["5"] == {"unavailable": "RuntimeError: planted failure"}
    # the references ran every case, before and after the crash
    assert set(results["diffusers"]["vs rl_kernel"]) == {"2", "5"}
    assert set(results["rl_kernel"]["vs diffusers"]) == {"2", "5"}


def test_a_hanging_mode_process_times_out_without_ending_the_run(tmp_path):
    out = tmp_path / "r.json"
    done = audit_in_process(
        *"run --op gate_residual --device cpu --case 3 --candidate hangs --timeout 10".split(),
        "--out",
        str(out),
        "-q",
        env=FAULTY,
    )
    assert done.returncode == 0, done.stderr
    results = load_report(out).root.model_dump(mode="json")["results"]
    assert "timed out after 10 s while running case 3" in results["hangs"]["unavailable"]
    assert "3" in results["diffusers"]["vs rl_kernel"]


def test_norm_modulate_on_cpu_end_to_end(tmp_path):
    """`audit run --op norm_modulate` on the CPU with its default cases, in a subprocess."""
    done = audit("run", "--op", "norm_modulate", "--device", "cpu", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    path = tmp_path / "h3_bitwise_reuse.norm_modulate.json"
    report = load_report(path).root
    data = json.loads(path.read_text())
    assert report.environment.gpu is None and report.environment.capability is None
    # plain, and the process the te_cudnn candidate needs (which cannot run here either)
    assert report.environment.mode_environment == {"plain": {}, "te_cudnn": MODES["te_cudnn"].env}
    assert report.environment.tf32 is False
    assert report.cases == [1, 257, 4097] and set(data["inputs_sha256"]) == {"1", "257", "4097"}
    results = data["results"]
    # real results for the CPU candidates ...
    for name, refs in {
        "diffusers": ["rl_kernel"],
        "rl_kernel": ["diffusers"],
        "torch_rms_norm": ["diffusers", "rl_kernel"],
    }.items():
        assert sorted(k for k in results[name] if k.startswith("vs ")) == [f"vs {r}" for r in refs]
        for ref in refs:
            for case, cmp in results[name][f"vs {ref}"].items():
                assert cmp["out"][0]["numel"] == int(case) * 5376
    assert set(results["torch_rms_norm"]["vs diffusers"]["257"]["grads"]) == {"x", "w"}
    assert set(results["rl_kernel"]["vs diffusers"]["257"]["grads"]) == {"x", "w", "sh", "sc"}
    assert results["rl_kernel"]["source"].endswith(
        "PyTorch oracle of the kernels' algorithm on the CPU, not the CUDA kernels (CPU results are not GPU results)"
    )
    # ... and the GPU-only ones say why they did not run
    for name in (
        "liger",
        "liger_rlk_gather",
        "sglang",
        "sglang_bi_rmsnorm",
        "megatron_bi_rmsnorm",
        "vllm_bi_rmsnorm",
        "transformer_engine",
        "te_rmsnorm_full",
        "transformer_engine_cudnn",
    ):
        assert "unavailable" in results[name], name
    assert "diffusers vs rl_kernel" in done.stdout and "verdicts" in done.stdout
    # each mode process's phases add up to its wall time (within 5 %), every phase it has measured
    assert set(report.timing.modes) == {"plain", "te_cudnn"}
    for mode, t in report.timing.modes.items():
        assert t.processes == 1 and list(t.phases) == list(PHASES), mode
        assert abs(t.unaccounted) <= 0.05 * t.wall, (mode, t)
    plain = report.timing.modes["plain"].phases  # it draws, computes, compares and writes the references
    assert all(plain[p] > 0 for p in ("imports", "inputs", "compute", "comparison", "writing")), plain
    shown = audit_in_process("show", str(path), "--timing")
    assert "timing" in shown.stdout and "unaccounted" in shown.stdout and "comparison" in shown.stdout


def test_row_op_with_only_a_library_mode_is_a_usage_error():
    done = audit_in_process("run", "--op", "gate_residual", "--mode", "sglang", "--device", "cpu")
    assert done.returncode == 2
    assert "plain mode only" in done.stderr


def _timestep_mlp(folder, ahead: int, modes: tuple[str, ...] = ()) -> dict:
    """``audit run --op timestep_mlp --case 1`` on the CPU with ``--ahead AHEAD``, in ``modes``
    (every library mode where none are given)."""
    out = folder / f"ahead{ahead}.json"
    argv = ["run", "--op", "timestep_mlp", "--case", "1", "--device", "cpu", "--ahead", str(ahead), "--out", str(out)]
    done = audit_in_process(*argv, *(a for m in modes for a in ("--mode", m)), "-q")
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def timestep_mlp_run(tmp_path_factory) -> dict:
    """``audit run --op timestep_mlp --case 1`` on the CPU: every library mode, workers started
    ahead of their turn (the default ``--ahead``)."""
    return _timestep_mlp(tmp_path_factory.mktemp("timestep_mlp"), 3)


def test_a_gemm_op_runs_every_mode_in_its_own_process_with_the_seeds_environment(timestep_mlp_run):
    data = timestep_mlp_run
    seed = json.loads((REPO / "tests" / "fixtures" / "h3_bitwise_reuse.timestep_mlp.json").read_text())
    ours = data["environment"]["mode_environment"]
    # every library mode; the seed's modes with the seed's variables, plus the SGLang DeepGEMM pin
    assert list(ours) == [m for m, mode in MODES.items() if mode.ops is None]
    unpinned = {m: {k: v for k, v in env.items() if k != SGLANG_DEEPGEMM} for m, env in ours.items()}
    assert {m: unpinned[m] for m in seed["environment"]["mode_environment"]} == seed["environment"]["mode_environment"]
    assert set(data["results"]) == {"rl_kernel"} | {f"diffusers[{m}]" for m in ours}
    assert set(seed["results"]) < set(data["results"])
    plain = data["results"]["diffusers[plain]"]["vs rl_kernel"]["1"]
    assert set(plain["grads"]) == {"x", "w1", "b1", "w2", "b2"}
    for mode in ours:
        entry = data["results"][f"diffusers[{mode}]"]
        if "unavailable" in entry:  # the library is not installed here: the reason says so
            assert f"mode {mode} cannot be switched on" in entry["unavailable"]
            continue
        # plain, or the library is installed: the mode ran and compared every output and gradient with both references
        if MODES[mode].library is not None:
            assert data["environment"]["libraries"][MODES[mode].library] is not None
        for ref in (r for r in ("diffusers[plain]", "rl_kernel") if r != f"diffusers[{mode}]"):
            cmp = entry[f"vs {ref}"]["1"]
            assert cmp["out"][0]["numel"] == 2688 and set(cmp["grads"]) == {"x", "w1", "b1", "w2", "b2"}, (mode, ref)


def test_workers_started_ahead_wait_for_their_turn_and_change_no_bit(tmp_path, timestep_mlp_run):
    """Started ahead (the default), the later modes' workers import and switch on while plain mode
    computes, and wait: the same inputs and the same comparisons as with each worker started at
    its turn (``--ahead 0``; plain mode, one mode with variables of its own and one without), and
    each process's phases still add up to its wall time."""
    at_turn = _timestep_mlp(tmp_path, 0, ("plain", "vllm", "megatron_triton"))
    assert timestep_mlp_run["inputs_sha256"] == at_turn["inputs_sha256"]
    assert set(at_turn["results"]) == {"rl_kernel", "diffusers[plain]", "diffusers[vllm]", "diffusers[megatron_triton]"}
    assert {name: timestep_mlp_run["results"][name] for name in at_turn["results"]} == at_turn["results"]
    ahead, plain_first = timestep_mlp_run["timing"]["modes"], at_turn["timing"]["modes"]
    assert all(t["phases"]["waiting"] < 0.05 for t in plain_first.values()), plain_first  # its turn had come
    assert any(t["phases"]["waiting"] > 0.5 for m, t in ahead.items() if m != "plain"), ahead
    for mode, t in ahead.items():
        assert abs(t["wall"] - sum(t["phases"].values())) <= 0.05 * t["wall"], (mode, t)


def test_the_references_run_in_plain_mode_when_only_another_mode_is_asked_for():
    from audit.core.ops import get_op
    from audit.parent.runner import plan
    from audit.parent.tasks import BITWISE, PRIOR_ART

    import torch

    op = get_op("adaln_projection")
    p = plan(op, BITWISE, modes=["sglang_deepgemm"], names=["diffusers"], units=[1], device=torch.device("cpu"))
    assert list(p.by_mode) == ["plain", "sglang_deepgemm"]
    assert {c.report_name("plain") for c in p.by_mode["plain"]} == set(op.references)
    assert [c.name for c in p.by_mode["sglang_deepgemm"]] == ["diffusers"]
    alone = plan(op, PRIOR_ART, modes=["sglang_deepgemm"], names=["diffusers"], units=[1], device=torch.device("cpu"))
    assert list(alone.by_mode) == ["sglang_deepgemm"]
    rows = plan(get_op("norm_modulate"), BITWISE, modes=["sglang"], names=None, units=[1], device=torch.device("cpu"))
    assert rows.by_mode == {}


def test_a_mode_whose_inputs_differ_from_plain_modes_is_not_compared():
    from audit.parent.assemble import bitwise_report
    from audit.core.candidates import get_candidate
    from audit.core.ops import get_op
    from audit.parent.runner import Outcome, Plan
    from audit.parent.tasks import BITWISE

    import torch

    op = get_op("timestep_mlp")
    diffusers, rl_kernel = get_candidate(op.name, "diffusers"), get_candidate(op.name, "rl_kernel")
    p = Plan(op, BITWISE, [1], torch.device("cpu"), {"plain": [diffusers, rl_kernel], "sglang": [diffusers]})
    same = {"out": [{"equal": True, "differ": 0, "numel": 1, "max_abs": 0.0}], "grads": {}}
    outcome = Outcome(
        results={
            "diffusers[plain]": {"source": "a", "vs rl_kernel": {"1": same}},
            "rl_kernel": {"source": "b", "vs diffusers[plain]": {"1": same}},
            "diffusers[sglang]": {"source": "c", "vs rl_kernel": {"1": same}},
        },
        fingerprints={"plain": {"1": "aa"}, "sglang": {"1": "bb"}},
        environments={"plain": {}, "sglang": {}},
    )
    results = bitwise_report(p, outcome)["results"]
    assert results["diffusers[sglang]"] == {"unavailable": "inputs in mode sglang differ from plain mode's"}
    assert results["rl_kernel"]["vs diffusers[plain]"]["1"] == same


def test_a_reference_lost_in_a_case_makes_that_case_unavailable_with_its_reason_and_the_report_valid():
    from audit.parent.assemble import bitwise_report
    from audit.core.candidates import get_candidate
    from audit.core.ops import get_op
    from audit.parent.runner import Outcome, Plan
    from audit.parent.tasks import BITWISE
    from reports.kinds import Report

    import torch

    op = get_op("timestep_mlp")
    diffusers, rl_kernel = get_candidate(op.name, "diffusers"), get_candidate(op.name, "rl_kernel")
    p = Plan(op, BITWISE, [1, 4], torch.device("cpu"), {"plain": [diffusers, rl_kernel], "sglang": [diffusers]})
    same = {"out": [{"equal": True, "differ": 0, "numel": 1, "max_abs": 0.0}], "grads": {}}
    died = {"unavailable": "mode plain process was killed by SIGKILL while running case 4"}
    # rl_kernel's process died in case 4, so the sglang process found no result of it there; nor, to word the
    # other reason, one of diffusers[plain]
    outcome = Outcome(
        results={
            "diffusers[plain]": {"source": "a", "vs rl_kernel": {"1": same, "4": died}},
            "rl_kernel": {"source": "b", "vs diffusers[plain]": {"1": same, "4": died}},
            "diffusers[sglang]": {"source": "c", "vs rl_kernel": {"1": same}, "vs diffusers[plain]": {"1": same}},
        },
        fingerprints={"plain": {"1": "aa", "4": "bb"}, "sglang": {"1": "aa", "4": "bb"}},
        environments={"plain": {}, "sglang": {}},
        failed={("rl_kernel", "4"): died["unavailable"]},
    )
    data = bitwise_report(p, outcome)
    lost = data["results"]["diffusers[sglang]"]["vs rl_kernel"]["4"]["unavailable"]
    assert lost == f"reference rl_kernel failed for this case: {died['unavailable']}"
    assert data["results"]["diffusers[sglang]"]["vs diffusers[plain]"]["4"] == {
        "unavailable": "reference diffusers[plain] has no result for case 4"
    }
    assert Report.model_validate(data).root.cases == [1, 4]


def test_a_case_a_candidate_refuses_is_unavailable_with_its_reason_and_the_others_run(tmp_path):
    out = tmp_path / "r.json"
    done = audit_in_process(
        *"run --op gate_residual --device cpu --case 2 --case 3 --candidate refuses_big_cases -q --out".split(),
        str(out),
        env={"AUDIT_PLUGINS": "tests.plugins.lifecycle", "LIFECYCLE_DIR": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr
    entry = json.loads(out.read_text())["results"]["refuses_big_cases"]
    assert entry["vs rl_kernel"]["2"]["out"][0]["equal"] is True
    assert entry["vs rl_kernel"]["3"] == {"unavailable": "refuses these shapes: 3 rows: this kernel takes at most 2"}


def _references_in_plain(units_by_op: dict[str, list[int]]):
    """Plans of plain mode on the CPU for the references only (a candidate another test registers
    in this pytest process is not in the worker), one per op, in order."""
    import torch

    from audit.core.ops import get_op
    from audit.parent.runner import plan
    from audit.parent.tasks import BITWISE

    cpu = torch.device("cpu")
    return [
        plan(get_op(op), BITWISE, modes=["plain"], names=["rl_kernel"], units=units, device=cpu)
        for op, units in units_by_op.items()
    ]


def test_a_runner_kills_the_workers_whose_turn_never_came_and_removes_their_folders():
    import signal

    from audit.parent.runner import Runner

    plans = _references_in_plain({"gate_residual": [2], "norm_modulate": [2]})
    with Runner(plans, timeout=120, ahead=1) as runner:
        done = runner.run(0, lambda name: None)
        ((_, _, waiting),) = runner.prepared.values()  # norm_modulate's worker, started ahead
        folder = waiting.stem.parent
        assert waiting.worker.popen.poll() is None and folder.is_dir()
    assert set(done.results["diffusers"]["vs rl_kernel"]) == {"2"}
    assert waiting.worker.popen.returncode == -signal.SIGKILL and not folder.exists()


def test_a_worker_killed_while_waiting_for_its_turn_loses_no_case():
    """A worker that has drawn its first case and waits for its turn (blocked reading its turn pipe)
    is killed, as the OOM killer would: the runner starts another, which computes every case."""
    import os
    import signal
    import time
    from pathlib import Path

    from audit.parent.runner import Runner

    plans = _references_in_plain({"gate_residual": [2], "norm_modulate": [2, 3]})
    with Runner(plans, timeout=120, ahead=1) as runner:
        runner.run(0, lambda name: None)
        ((_, _, waiting),) = runner.prepared.values()
        pid, deadline = waiting.worker.popen.pid, time.monotonic() + 120
        while "pipe" not in Path(f"/proc/{pid}/wchan").read_text():
            assert waiting.worker.popen.poll() is None, f"the worker ended before its turn: {waiting.worker.tail()}"
            assert time.monotonic() < deadline, f"the worker never waited for its turn: {waiting.worker.tail()}"
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)
        outcome = runner.run(1, lambda name: None)
    assert outcome.timing["plain"]["processes"] == 2
    for name, ref in (("diffusers", "rl_kernel"), ("rl_kernel", "diffusers")):
        compared = outcome.results[name][f"vs {ref}"]
        assert set(compared) == {"2", "3"} and not any("unavailable" in c for c in compared.values()), compared
