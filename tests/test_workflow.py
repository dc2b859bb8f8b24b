"""The CI workflow is valid YAML, and every `audit` command it runs works: each is run on the CPU
with tiny cases (one op, one case, the references only), reports going to a temporary directory."""

import shlex
from pathlib import Path

import yaml
from typer.testing import CliRunner

from audit.cli import app
from tests.helpers import REPO

WORKFLOW = REPO / ".github" / "workflows" / "audit.yml"


def audit_commands() -> list[list[str]]:
    """The audit commands of the GPU job (the CPU job's `audit selftest` has its own tests)."""
    doc = yaml.safe_load(WORKFLOW.read_text())
    commands = []
    for job in [doc["jobs"]["gpu-audit"]]:
        for step in job["steps"]:
            for line in step.get("run", "").splitlines():
                line = line.strip()
                if line.startswith("audit "):
                    commands.append(shlex.split(line.split(">>")[0])[1:])
    return commands


def test_workflow_has_a_cpu_and_a_self_hosted_gpu_job():
    doc = yaml.safe_load(WORKFLOW.read_text())
    assert set(doc["jobs"]) == {"cpu-tests", "gpu-audit"}
    assert "gpu" in doc["jobs"]["gpu-audit"]["runs-on"] and "self-hosted" in doc["jobs"]["gpu-audit"]["runs-on"]
    uploads = [s for s in doc["jobs"]["gpu-audit"]["steps"] if "upload-artifact" in s.get("uses", "")]
    assert uploads and uploads[0]["with"]["path"].endswith(".json")
    paths = [s["with"]["path"] for s in uploads]
    assert "audit-report.html" in paths and "junit/*.xml" in paths


def test_every_audit_command_in_the_workflow_parses():
    commands = audit_commands()
    assert {c[0] for c in commands} >= {"list", "run", "prior-art", "validate", "show"}
    runner = CliRunner()
    for args in commands:
        # --help after the command's own options checks that every option exists without running it
        result = runner.invoke(app, [args[0], *[a for a in args[1:] if not a.startswith("audit-reports/")], "--help"])
        assert result.exit_code == 0, (args, result.output)


def on_cpu(args: list[str], reports: Path) -> list[list[str]]:
    """The CPU, tiny-case form of one workflow command (one per report for a ``"$f"`` loop)."""
    args = ["cpu" if a == "cuda" else a for a in args]
    args = [str(reports.parent / Path(a).name) if a.endswith((".xml", ".html")) else a for a in args]  # artifacts
    if "--baseline" in args:  # the gate against the H200 reports is not a CPU question: against this run's own
        at = args.index("--baseline")
        args = args[:at] + args[at + 2 :]
        args = [a for i, a in enumerate(args) if a != "--fail-on" and (i == 0 or args[i - 1] != "--fail-on")]
    if args[0] in ("diff", "report"):
        args = [str(reports) if a == "audit-reports" else a for a in args]
    if args[0] in ("run", "prior-art"):
        args = ["gate_residual" if a == "all" else str(reports) if a == "audit-reports" else a for a in args]
        args += (
            ["--case", "1", "--candidate", "diffusers"] if args[0] == "run" else ["--quick", "--candidate", "rl_kernel"]
        )
    files = sorted(str(p) for p in reports.glob("*.json"))
    if "$f" in args:
        return [[a for a in args if a != "$f"] + [f] for f in files]
    return [[x for a in args for x in (files if a == "audit-reports/*.json" else [a])]]


def test_every_audit_command_in_the_workflow_runs_on_the_cpu(tmp_path):
    runner = CliRunner()
    reports = tmp_path / "audit-reports"
    ran = []
    for args in audit_commands():
        for cpu_args in on_cpu(args, reports):
            result = runner.invoke(app, cpu_args)
            # the job summary's diff of the H200 reports against a CPU run has regressions; the
            # workflow keeps going (`|| true`), so 1 is fine there
            assert result.exit_code in ((0, 1) if cpu_args[0] == "diff" else (0,)), (cpu_args, result.output[-3000:])
            ran.append(cpu_args[0])
            if cpu_args[0] == "run":  # the progress bar says what it counts and how long is left
                assert "candidate × case" in result.stderr and "ETA" in result.stderr
    assert ran == ["env", "list", "run", "prior-art", "validate", "diff", "show", "show", "report"]
    assert {p.name for p in tmp_path.iterdir()} >= {"run.xml", "prior-art.xml", "audit-report.html"}
    assert sorted(p.name for p in reports.iterdir()) == [
        "h3_bitwise_reuse.gate_residual.json",
        "h3_prior_art.gate_residual.json",
    ]
