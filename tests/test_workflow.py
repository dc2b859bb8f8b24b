"""The CI workflow is valid YAML, and every `audit` command it runs exists in the CLI."""

import shlex
from pathlib import Path

import yaml
from typer.testing import CliRunner

from audit.cli import app

WORKFLOW = Path(__file__).resolve().parent.parent / ".github" / "workflows" / "audit.yml"


def audit_commands() -> list[list[str]]:
    doc = yaml.safe_load(WORKFLOW.read_text())
    commands = []
    for job in doc["jobs"].values():
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


def test_every_audit_command_in_the_workflow_parses():
    commands = audit_commands()
    assert {c[0] for c in commands} >= {"list", "run", "prior-art", "validate", "show"}
    runner = CliRunner()
    for args in commands:
        # --help after the command's own options checks that every option exists without running it
        result = runner.invoke(app, [args[0], *[a for a in args[1:] if not a.startswith("audit-reports/")], "--help"])
        assert result.exit_code == 0, (args, result.output)
