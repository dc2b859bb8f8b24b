"""``audit parallel`` under torchrun with gloo on the CPU, 2 ranks: what sharding keeps bitwise."""

import json
import os

import pytest
from typer.testing import CliRunner

from audit.cli import app
from audit.core.layouts import LAYOUTS
from audit.core.ops import OPS
from reports.io import load_report
from reports.parallel import verdicts
from tests.helpers import REPO, audit_in_process

runner = CliRunner()


@pytest.fixture(scope="module")
def sp_rows_gate_residual(tmp_path_factory):
    """The report of ``audit parallel --op gate_residual --layout sp_rows --ranks 2 --device cpu``
    at 2, 64 and 528 rows with every candidate, run once for the two tests that read it."""
    out = tmp_path_factory.mktemp("sp_rows") / "r.json"
    argv = "parallel --op gate_residual --layout sp_rows --ranks 2 --device cpu --case 2 --case 64 --case 528"
    done = audit_in_process(*argv.split(), "--out", str(out), "-q")
    assert done.returncode == 0, done.stderr
    return out


def test_sp_rows_on_a_row_op_gathers_rows_bitwise_and_sums_the_table_gradient(sp_rows_gate_residual):
    out = sp_rows_gate_residual
    report = load_report(out).root
    assert (report.layout, report.ranks, report.backend) == ("sp_rows", 2, "gloo")
    for name in ("diffusers", "rl_kernel"):
        entry = report.results[name]
        assert entry.reduced == ["dgate"]
        for case, both in entry.cases.items():
            for how in ("native", "fixed_order"):
                found = getattr(both, how).by_tensor()
                # every row is computed by one rank: the output and row gradients are the single process's
                assert all(found[t].equal for t in ("out", "dres", "dy")), (name, case, how)
            # two partial sums commute: both reductions give the same bits
            assert both.native == both.fixed_order
        # with one row per rank, the first rows hit distinct table rows: each gate-gradient row is one
        # rank's partial plus exact zeros, so the sum must be the single-process bits
        assert entry.cases["2"].fixed_order.grads["gate"].equal
    assert {v.candidate: v.verdict for v in verdicts(load_report(out).root)}.keys() >= {"diffusers", "rl_kernel"}


def test_tp_column_keeps_the_output_and_the_split_parameters_bitwise(tmp_path):
    out = tmp_path / "r.json"
    done = audit_in_process(
        *(
            "parallel --op timestep_mlp --layout tp_column --ranks 2 --device cpu "
            "--case 1 --case 4 --candidate diffusers"
        ).split(),
        "--out",
        str(out),
        "-q",
    )
    assert done.returncode == 0, done.stderr
    report = load_report(out).root
    entry = report.results["diffusers"]
    assert entry.reduced == ["dx", "dw1", "db1"]  # the replicated first linear and the input
    for both in entry.cases.values():
        for how in ("native", "fixed_order"):
            found = getattr(both, how).by_tensor()
            # column-parallel keeps every output element's and every split weight row's term order
            assert found["out"].equal and found["dw2"].equal and found["db2"].equal
    [v] = [v for v in verdicts(load_report(out).root) if v.candidate == "diffusers"]
    assert v.verdict in ("bitwise", "bitwise with the fixed-order reduction", "gathered bitwise")
    assert json.loads(out.read_text())["nccl_environment"] == {}


def test_a_failing_rank_stops_every_rank_and_is_reported(tmp_path):
    out = tmp_path / "r.json"
    done = audit_in_process(
        *(
            "parallel --op gate_residual --layout sp_rows --ranks 2 --device cpu "
            "--case 2 --candidate fails_on_rank_1 --candidate diffusers"
        ).split(),
        "--out",
        str(out),
        "-q",
        env={"AUDIT_PLUGINS": "tests.plugins.rank_fails"},
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    reason = data["results"]["fails_on_rank_1"]["unavailable"]
    assert "rank1 failed: RuntimeError: planted failure on rank 1" in reason
    assert data["results"]["diffusers"]["cases"]["2"]["native"]["out"][0]["equal"] is True  # the next candidate ran


@pytest.mark.parametrize(
    "args, message",
    [
        (["--op", "gate_residual", "--layout", "tp_column"], "has no layout 'tp_column'"),
        (["--op", "gate_residual", "--layout", "sp_rows", "--ranks", "1"], "at least 2"),
        (["--op", "adaln_projection", "--layout", "sp_rows", "--case", "3"], "does not split into 2 equal shards"),
        (["--op", "adaln_projection", "--layout", "tp_column", "--ranks", "5"], "only along the rows of a row op"),
        (["--op", "gate_residual", "--layout", "sp_rows", "--ranks", "4", "--case", "3"], "fewer elements than the 4"),
        (["--op", "gate_residual", "--layout", "sp_rows", "--backend", "nccl", "--device", "cpu"], "use gloo"),
        (["--op", "gate_residual", "--layout", "diagonal"], "unknown layout"),
        (["--op", "gate_residual", "--layout", "sp_rows", "--ranks", "1000"], "one per core"),
        (["--op", "gate_residual", "--layout", "sp_rows", "--case", "99999999999999999999"], "--case"),
    ],
)
def test_bad_input_is_one_line_and_status_2_before_anything_starts(args, message):
    r = runner.invoke(app, ["parallel", "--device", "cpu", *args] if "--device" not in args else ["parallel", *args])
    assert r.exit_code == 2 and message in r.output, r.output


def test_every_op_has_a_layout_and_the_gemm_ops_have_all_three():
    assert {op for op, _ in LAYOUTS} == set(OPS)
    for op in ("adaln_projection", "timestep_mlp"):
        assert {name for o, name in LAYOUTS if o == op} == {"tp_column", "tp_row", "sp_rows"}


def test_a_parallel_report_shows_and_has_no_plot(tmp_path):
    # the example reports hold no parallel report: a minimal one by hand
    data = {
        "kind": "h3_parallel",
        "rfc": "x",
        "op": "gate_residual",
        "rl_kernel_commit": "unknown",
        "tracked_tree_dirty": "unknown",
        "layout": "sp_rows",
        "ranks": 2,
        "backend": "gloo",
        "nccl_environment": {},
        "cases": [2],
        "environment": {
            "gpu": None,
            "capability": None,
            "torch": "2",
            "cuda": None,
            "python": "3",
            "tf32": False,
            "libraries": {},
            "mode_environment": {},
        },
        "results": {"x": {"unavailable": "not here"}},
    }
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    shown = runner.invoke(app, ["show", "--format", "markdown", str(path)])
    assert shown.exit_code == 0 and "➖ unavailable | not here" in shown.output
    plotted = runner.invoke(app, ["plot", str(path), "--out", str(tmp_path / "p.png")])
    assert plotted.exit_code == 2 and "no plot" in plotted.output


def test_a_forward_only_candidate_is_not_said_to_have_summed_gradients():
    """The layout sums dw and dsh, but a forward-only candidate compares only ``out``: its verdict
    names no reduced tensor, while a candidate with those gradients names them."""
    from reports.parallel import ParallelCandidate, decide

    equal = {"equal": True, "differ": 0, "numel": 4, "max_abs": 0.0}

    def candidate(grads: dict) -> ParallelCandidate:
        case = {"out": [equal], "grads": grads}
        return ParallelCandidate(
            source="s", reduced=["dw", "dsh"], seconds=1.0, cases={"2": {"native": case, "fixed_order": case}}
        )

    verdict, detail = decide(candidate({}))
    assert verdict == "bitwise" and "(none reduced)" in detail
    verdict, detail = decide(candidate({"w": equal, "sh": equal}))
    assert verdict == "bitwise" and "(dw, dsh reduced)" in detail


def test_rl_kernel_keeps_the_single_process_bits_under_the_chunk_order(sp_rows_gate_residual):
    """Across ranks the naive sums of d_gate differ from one process at 528 rows; rl_kernel's chunk
    partials, all-gathered and folded in the one-process order, do not, and the report counts the
    difference."""
    out = sp_rows_gate_residual
    report = load_report(out).root
    ours, theirs = report.results["rl_kernel"], report.results["diffusers"]
    case = ours.cases["528"]
    assert all(cmp.equal for cmp in case.chunk_order.by_tensor().values())
    assert not case.fixed_order.grads["gate"].equal  # the naive sum changes it
    assert theirs.cases["528"].chunk_order is None and "declares no chunk order" in theirs.no_chunk_order
    found = {v.candidate: v.verdict for v in verdicts(report)}
    assert found["rl_kernel"] == "bitwise with the chunk-order reduction"
    shown = runner.invoke(app, ["show", "--format", "markdown", str(out)])
    differ, numel = case.fixed_order.grads["gate"].differ, case.fixed_order.grads["gate"].numel
    assert f"{differ:,} / {numel:,} ({100 * differ / numel:.1f} %)" in shown.output
    # the step times: one process, and the sharded step per reduction (chunk order only where there is one)
    took = case.step_seconds
    assert min(took.single_process, took.native, took.fixed_order, took.chunk_order) > 0
    assert theirs.cases["528"].step_seconds.chunk_order is None
    assert "rl_kernel, step time" in shown.output
    assert f"{took.chunk_order * 1e3:,.1f} ms (× {took.chunk_order / took.single_process:.2f})" in shown.output


def test_a_candidate_that_does_not_repeat_itself_is_told_apart_from_sharding(tmp_path):
    """flaky_gate_grad's d_gate changes from call to call in one process as on shards: each
    comparison of d_gate is marked not repeatable, the single process's own repeats say it, and the
    verdict blames the candidate, not the sharding; diffusers beside it repeats every bit."""
    out = tmp_path / "r.json"
    done = audit_in_process(
        *"parallel --op gate_residual --layout sp_rows --ranks 2 --device cpu --case 2 --repeats 2".split(),
        *"--candidate flaky_gate_grad --candidate diffusers --out".split(),
        str(out),
        "-q",
        env={"AUDIT_PLUGINS": "tests.plugins.flaky"},
    )
    assert done.returncode == 0, done.stderr
    report = load_report(out).root
    assert report.repeats == 2
    flaky, steady = report.results["flaky_gate_grad"].cases["2"], report.results["diffusers"].cases["2"]
    assert flaky.single_process_repeat_differ["dgate"] >= 1
    assert flaky.single_process_repeat_differ["out"] == 0
    for how, cmp in flaky.reductions().items():
        found = cmp.by_tensor()
        assert found["dgate"].repeatable is False and found["dgate"].repeat_differ >= 1, how
        assert all(found[t].repeatable for t in ("out", "dres", "dy")), how
    assert set(steady.single_process_repeat_differ.values()) == {0}
    assert all(c.repeatable for how in steady.reductions().values() for c in how.by_tensor().values())
    found = {v.candidate: v for v in verdicts(report)}
    assert found["flaky_gate_grad"].verdict == "nondeterministic" and "dgate" in found["flaky_gate_grad"].detail
    assert found["diffusers"].verdict != "nondeterministic" and "repeatably" in found["diffusers"].detail
    shown = runner.invoke(app, ["show", "--format", "markdown", str(out)])
    assert "nondeterministic" in shown.output and "runs differ in" in shown.output


def test_sharded_runs_that_differ_count_against_the_reduction_not_the_candidate():
    """When only the sharded step's runs differ (the single process repeats its bits), an equal
    first run does not make a reduction bitwise: the difference is sharding's."""
    from reports.parallel import ParallelCandidate, decide

    equal = {"equal": True, "differ": 0, "numel": 4, "max_abs": 0.0, "repeatable": True}
    unsteady = equal | {"repeatable": False, "repeat_differ": 1}

    def candidate(native: dict, single: dict | None) -> ParallelCandidate:
        fixed = {"out": [equal], "grads": {"gate": equal}}
        case = {"native": {"out": [equal], "grads": {"gate": native}}, "fixed_order": fixed}
        case |= {"single_process_repeat_differ": single} if single is not None else {}
        return ParallelCandidate(source="s", reduced=["dgate"], seconds=1.0, cases={"2": case})

    verdict, detail = decide(candidate(unsteady, {"out": 0, "dgate": 0}))
    assert verdict == "bitwise with the fixed-order reduction"
    assert "all-reduce changes dgate" in detail and "sharded runs differ from each other in dgate" in detail
    verdict, detail = decide(candidate(unsteady, {"out": 0, "dgate": 3}))
    assert verdict == "nondeterministic" and "up to 3 elements" in detail
    # a gathered tensor that differs stably is sharding's doing, whatever else does not repeat
    off = candidate(unsteady, {"out": 0, "dgate": 3})
    off.cases["2"].native.out[0] = off.cases["2"].native.out[0].model_copy(update={"equal": False, "differ": 1})
    verdict, detail = decide(off)
    assert verdict == "differs" and "gathered out" in detail and "dgate" in detail
    verdict, detail = decide(candidate(equal, {"out": 0, "dgate": 0}))
    assert verdict == "bitwise" and "repeatably" in detail
    verdict, detail = decide(candidate({k: v for k, v in equal.items() if k != "repeatable"}, None))
    assert verdict == "bitwise" and "repeatably" not in detail  # --repeats 1: not checked, not claimed


@pytest.mark.parametrize("op, ranks, rows", [("gate_residual", 4, 528), ("norm_modulate", 8, 531)])
def test_rl_kernel_keeps_the_single_process_bits_at_4_and_8_gloo_ranks(tmp_path, op, ranks, rows):
    """Real gloo ranks beyond this machine's cores, on even shards (528 rows over 4) and uneven ones
    (531 rows over 8: 67 on the first three ranks, 66 on the others): rl_kernel's chunk order keeps
    every tensor, gathered and reduced, bitwise while the naive sums change the table gradients;
    ranks beyond the cores are warned of."""
    out = tmp_path / "r.json"
    done = audit_in_process(
        *f"parallel --op {op} --layout sp_rows --ranks {ranks} --device cpu --case {rows} --repeats 1".split(),
        *"--candidate rl_kernel --out".split(),
        str(out),
        "-q",
    )
    assert done.returncode == 0, done.stderr
    assert ("take turns" in done.stderr) == (ranks > (os.cpu_count() or 1))
    report = load_report(out).root
    assert report.ranks == ranks
    case = report.results["rl_kernel"].cases[str(rows)]
    assert case.chunk_order is not None and all(cmp.equal for cmp in case.chunk_order.by_tensor().values())
    naive = case.fixed_order.by_tensor()
    assert any(not naive[t].equal for t in report.results["rl_kernel"].reduced)
    assert [v.verdict for v in verdicts(report)] == ["bitwise with the chunk-order reduction"]


def test_a_run_without_a_cases_results_says_so_and_the_report_is_valid():
    """run_candidate's results lack case 64 and carry no failure (torchrun ended with 0): the report
    says why the case is absent, as a stopped run does, instead of leaving it unexplained."""
    import torch

    from audit.parent.assemble import parallel_report
    from audit.parent.parallel import plan_parallel
    from reports.kinds import Report

    p = plan_parallel(
        OPS["gate_residual"], "sp_rows", ranks=2, backend=None, device=torch.device("cpu"), cases=[2, 64], names=None
    )
    name = p.candidates[0].name
    ran = json.loads((REPO / "docs/evidence/h200/parallel/h3_parallel.norm_modulate.sp_rows.json").read_text())
    one = ran["results"]["diffusers"]["cases"]["2"]
    data = parallel_report(p, {name: {"2": dict(one), "seconds": 1.0}}, {name: "source"})
    assert data["results"][name]["failed"] == "the run ended without the results of case 64"
    assert list(Report.model_validate(data).root.results[name].cases) == ["2"]
