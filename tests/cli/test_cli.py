import json

import pytest
from typer.testing import CliRunner

from audit.cli import app
from tests.helpers import FIXTURES, REPO, SEEDS
from reports.io import load_report

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "250"})


def test_list_shows_ops_candidates_modes_and_why_unavailable():
    r = invoke("list", "--device", "cpu")
    assert r.exit_code == 0, r.output
    for name in ("norm_modulate", "gate_residual", "timestep_mlp", "adaln_projection", "megatron_triton_ieee"):
        assert name in r.output
    assert "diffusers" in r.output and "rl_kernel" in r.output and "torch_rms_norm" in r.output


def test_list_on_cpu_shows_the_cases_a_cpu_run_uses():
    r = invoke("list", "--device", "cpu")
    cells = [[c.strip() for c in line.split("│")[1:-1]] for line in r.output.splitlines() if line.count("│") > 5]
    rows = {c[0]: "│ " + " │ ".join(c) + " │" for c in cells if c[1] in ("row", "gemm")}  # the ops table
    assert "│ 1 257 4097 │" in rows["norm_modulate"]
    assert "│ 1 4 │" in rows["adaln_projection"]


def test_a_cpu_report_says_rl_kernel_is_the_pytorch_oracle_not_the_cuda_kernels(tmp_path):
    data = json.loads(SEEDS[1].read_text())  # gate_residual, from a B200
    data["environment"]["gpu"] = data["environment"]["capability"] = None
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps(data))
    for fmt in ("table", "markdown"):
        r = invoke("show", "--format", fmt, str(path))
        assert (
            "CPU run: rl_kernel here is the PyTorch oracle of the kernels' algorithm, not the CUDA kernels" in r.output
        )
        assert "CPU results are not GPU results" in r.output
    assert "PyTorch oracle" not in invoke("show", str(SEEDS[1])).output


def test_schema_prints_json_schema_per_kind():
    r = invoke("schema", "--kind", "h3_prior_art")
    assert r.exit_code == 0
    assert "batch_size_sweep" in json.dumps(json.loads(r.output))
    assert invoke("schema", "--kind", "nope").exit_code == 2


def test_validate_accepts_the_examples():
    r = invoke("validate", *map(str, SEEDS))
    assert r.exit_code == 0, r.output


def test_validate_names_the_offending_field(tmp_path):
    data = json.loads(SEEDS[0].read_text())
    data["results"]["rl_kernel"]["vs diffusers[plain]"]["4"]["grads"]["w"]["numel"] = -1
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    r = invoke("validate", str(SEEDS[1]), str(bad))
    assert r.exit_code == 1
    assert '$.results.rl_kernel["vs diffusers[plain]"]["4"].grads.w.numel' in r.output


def test_validate_rejects_non_json(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    r = invoke("validate", str(bad))
    assert r.exit_code == 1 and "not JSON" in r.output


def test_validate_refuses_a_path_that_names_nothing_before_reading_any_file(tmp_path):
    r = invoke("validate", str(SEEDS[0]), str(tmp_path / "gone.json"), str(tmp_path / "also.json"))
    assert r.exit_code == 2
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert lines == [f"error: no such file: {tmp_path / 'gone.json'}, {tmp_path / 'also.json'}"], r.stderr
    assert "valid" not in r.stdout  # SEEDS[0] was not read


def test_validate_names_a_symbolic_link_to_nothing_as_an_invalid_file(tmp_path):
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "gone.json")
    r = invoke("validate", str(SEEDS[0]), str(link))
    assert r.exit_code == 1
    assert f"{link}: $: a symbolic link to nothing" in r.stderr and "valid" in r.stdout


@pytest.mark.parametrize("fmt", ["table", "markdown", "json"])
@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.name)
def test_show_renders_every_example(path, fmt):
    r = invoke("show", "--format", fmt, str(path))
    assert r.exit_code == 0, r.output
    report = load_report(path).root
    assert report.op in r.output
    if fmt == "json":  # one document of verdicts and comparisons (tests/reports/test_show_json.py)
        (shown,) = json.loads(r.output)["reports"]
        assert (shown["path"], shown["kind"], shown["op"]) == (str(path), report.kind, report.op)
    if fmt == "markdown":
        assert "| case |" in r.output or "| candidate |" in r.output


def test_show_marks_differences_in_markdown():
    r = invoke("show", "--format", "markdown", str(SEEDS[1]))  # gate_residual
    assert "❌ 35,402/48,384 differ" in r.output and "✅ equal" in r.output


def test_show_rejects_a_malformed_report_with_status_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "h3_bitwise_reuse"}))
    assert invoke("show", str(bad)).exit_code == 2


@pytest.mark.parametrize(
    "args, valid",
    [
        (["--op", "layer_norm"], "norm_modulate"),
        (["--op", "gate_residual", "--mode", "fast"], "megatron_triton"),
        (["--op", "gate_residual", "--candidate", "apex"], "rl_kernel"),
        (["--op", "gate_residual", "--case", "0"], "rows"),
        (["--op", "gate_residual", "--device", "tpu"], "cpu"),
    ],
)
def test_run_rejects_unknown_names_with_status_2(args, valid):
    r = invoke("run", *args)
    assert r.exit_code == 2
    assert valid in r.output


def test_run_one_small_case_writes_a_valid_report(tmp_path):
    out = tmp_path / "r.json"
    r = invoke("run", "--op", "gate_residual", "--case", "5", "--device", "cpu", "--out", str(out))
    assert r.exit_code == 0, r.output
    report = load_report(out).root
    assert report.cases == [5] and set(report.inputs_sha256) == {"5"}
    # the verdicts come first, then each pair of candidates once
    assert r.output.index("verdicts") < r.output.index("diffusers vs rl_kernel")
    assert "rl_kernel vs diffusers" not in r.output


def test_show_keeps_bracketed_candidate_names():
    r = invoke("show", str(SEEDS[3]))  # timestep_mlp
    assert "diffusers[vllm] vs diffusers[plain]" in r.output


def test_show_says_when_only_parameter_gradients_break_invariance(tmp_path):
    seed = next(p for p in SEEDS if p.name.startswith("h3_prior_art"))
    data = json.loads(seed.read_text())
    bi = data["results"]["plain"]["rl_kernel"]["batch_invariance"]
    bi["params_repeatable"], bi["batch_invariant"] = False, False
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    r = invoke("show", "--format", "markdown", str(path))
    assert r.exit_code == 0, r.output
    lines = {line.split("|")[1].strip(): line for line in r.output.splitlines() if line.startswith("| ")}
    assert "no (rows 0, sub-batches 0, sweep 0/2256; parameter gradients not repeatable)" in lines["rl_kernel"]
    assert "not repeatable" not in lines["diffusers[plain]"]


@pytest.mark.parametrize("markdown", [False, True])
def test_a_reader_that_closes_the_pipe_early_ends_the_command_quietly_with_status_0(markdown):
    import subprocess
    import sys

    repo = REPO
    files = sorted(map(str, (repo / "tests" / "fixtures").glob("*.json"))) * 4  # well over a pipe's 64 KB
    argv = [sys.executable, "-m", "audit", "show", *(["-f", "markdown"] if markdown else []), *files]
    proc = subprocess.Popen(argv, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()  # as `| head -1` does
    stderr = proc.stderr.read()
    assert proc.wait(timeout=60) == 0 and stderr == b"", stderr


def test_plot_out_into_a_missing_directory_creates_it(tmp_path):
    target = tmp_path / "new" / "deeper" / "grid.png"
    r = invoke("plot", str(FIXTURES / "h3_bitwise_reuse.gate_residual.json"), "--out", str(target))
    assert r.exit_code == 0, r.output
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "argv, says",
    [
        (["chain", "--length", str(2**63), "--device", "cpu"], "--length 9223372036854775808"),
        (["run", "--op", "gate_residual", "--repeats", "101", "--device", "cpu"], "--repeats"),
        (["run", "--op", "gate_residual", "--config", "tests", "--device", "cpu"], "a directory, not a file"),
        (["run", "--op", "gate_residual", "--mode", "plain@", "--device", "cpu"], "no environment after '@'"),
        (["run", "--op", "norm_modulate", "--mode", "vllm", "--device", "cpu"], "--mode vllm runs none of"),
        (["prior-art", "--op", "gate_residual", "--mode", "sglang", "--device", "cpu"], "it runs timestep_mlp"),
        (
            ["run", "--op", "adaln_projection", "--candidate", "diffusers[vllm]", "--mode", "plain", "--device", "cpu"],
            "--candidate diffusers[vllm] runs in none of the selected modes (plain) for adaln_projection",
        ),
        (
            ["run", "--op", "norm_modulate", "--candidate", "transformer_engine_cudnn", "--mode", "plain"],
            "it runs in te_cudnn",
        ),
    ],
)
def test_out_of_range_values_are_refused_before_anything_runs(argv, says):
    r = invoke(*argv)
    assert r.exit_code == 2 and says in r.output, r.output
