"""``--junit``: the file validates against the JUnit schema, has one test case per verdict and
compared cell, and fails exactly where the ``--fail-on`` policy fails (``reports.diff.gate``),
on the committed reports and on planted regressions; an unusable ``--junit`` is exit 2 before
anything runs."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from audit.cli import app
from reports.diff import gate
from reports.io import load_each, load_set, parse_report
from reports.junit import junit_xml
from reports.kinds import kind_of
from tests.helpers import FIXTURES, audit_in_process
from tests.reports.test_diff import _in_state
from tests.reports.test_html import EVIDENCE

XSD = FIXTURES / "junit" / "junit.xsd"


def failures(xml: str) -> list[ET.Element]:
    """The failing test cases."""
    return [c for c in ET.fromstring(xml).iter("testcase") if c.find("failure") is not None]


def validate(xml: str) -> None:
    xmlschema = pytest.importorskip("xmlschema", reason="could not import xmlschema (pip install -e '.[test]')")
    xmlschema.XMLSchema(XSD).validate(ET.fromstring(xml))


@pytest.fixture(scope="module")
def evidence():
    loaded, problems = load_each(EVIDENCE)
    assert not problems
    return loaded


@pytest.mark.parametrize("fail_on", ["none", "regression", "differ"])
def test_failures_are_exactly_the_gates_on_the_committed_reports(evidence, fail_on):
    bitwise = [(p, r) for p, r in evidence if r.root.kind == "h3_bitwise_reuse" and p.parent.name == "h200"]
    reports, paths = [r for _, r in bitwise], [p for p, _ in bitwise]
    diff, why = gate(reports, paths, load_set(FIXTURES), fail_on)
    xml = junit_xml(bitwise, fail_on=fail_on, diff=diff)
    validate(xml)
    assert bool(failures(xml)) == bool(why)
    regressions = [c for c in failures(xml) if c.find("failure").get("type") in ("regression", "lost")]
    expected = 0 if fail_on == "none" else diff.count("regression") + sum(not x.allowed for x in diff.lost)
    assert len(regressions) == expected


def test_under_differ_each_differing_verdict_fails_and_each_unavailable_one_is_skipped(evidence):
    xml = junit_xml(evidence, fail_on="differ")
    validate(xml)
    cases = list(ET.fromstring(xml).iter("testcase"))
    for _, report in evidence:
        kind = kind_of(report)
        for v in kind.verdicts(report.root):
            status = kind.statuses[v.verdict]
            mine = [
                c
                for c in cases
                if c.get("classname").endswith(f".{v.candidate}") and c.get("name").startswith("verdict")
            ]
            assert mine, v
            outcome = {
                ("failure" if c.find("failure") is not None else "skipped" if c.find("skipped") is not None else "pass")
                for c in mine
            }
            if status == "na":
                assert "skipped" in outcome, v
            elif status != "ok":
                assert "failure" in outcome, v


def test_one_case_per_candidate_case_and_tensor_with_counts_and_first_index_in_the_failure():
    report = parse_report(_in_state("differs", 100))
    report.root.results["diffusers"].comparisons()["rl_kernel"]["257"].grads["gate"].first_differ = [3, 5]
    xml = junit_xml([(Path("r.json"), report)], fail_on="differ")
    [case] = [
        c
        for c in ET.fromstring(xml).iter("testcase")
        if c.get("classname") == "gate_residual.diffusers vs rl_kernel" and c.get("name") == "case 257 · dgate"
    ]
    message = case.find("failure").get("message")
    assert "100/48,384 differ" in message and "first differing index [3, 5]" in message
    names = [c.get("name") for c in ET.fromstring(xml).iter("testcase") if "vs rl_kernel" in c.get("classname")]
    assert len(names) == len(set(names)) == 4 * 4  # 4 cases × (out, dres, dy, dgate)


@pytest.mark.parametrize("fail_on", ["none", "regression", "differ"])
def test_a_planted_regression_fails_where_the_gate_does(tmp_path, fail_on):
    old = parse_report(_in_state("equal", 0))
    new = parse_report(_in_state("differs", 100))
    baseline = {kind_of(old).key(old.root): (tmp_path / "old.json", old)}
    diff, why = gate([new], [tmp_path / "new.json"], baseline, fail_on)
    xml = junit_xml([(tmp_path / "new.json", new)], fail_on=fail_on, diff=diff)
    validate(xml)
    failed = {
        (c.get("classname"), c.get("name")) for c in failures(xml) if c.find("failure").get("type") == "regression"
    }
    assert bool(failures(xml)) == bool(why)
    assert failed == (set() if fail_on == "none" else {("gate_residual.diffusers", "vs rl_kernel · case 257 · dgate")})


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def test_diff_junit_fails_on_the_planted_regression_only(tmp_path):
    (tmp_path / "old.json").write_text(json.dumps(_in_state("equal", 0)))
    (tmp_path / "new.json").write_text(json.dumps(_in_state("differs", 100)))
    out = tmp_path / "diff.xml"
    result = invoke("diff", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--junit", str(out))
    assert result.exit_code == 1, result.output
    xml = out.read_text()
    validate(xml)
    assert [(c.get("classname"), c.get("name")) for c in failures(xml)] == [
        ("gate_residual.diffusers", "vs rl_kernel · case 257 · dgate")
    ]


@pytest.mark.parametrize("command", [["run", "--op", "gate_residual"], ["diff", str(FIXTURES), str(FIXTURES)]])
@pytest.mark.parametrize("junit", ["/proc/audit.xml", "report.junit"])
def test_an_unusable_junit_is_exit_2_before_anything_runs(command, junit):
    result = invoke(*command, "--junit", junit)
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: --junit:"), result.output


@pytest.mark.slow
def test_run_junit_names_the_planted_candidate_and_fails_with_the_gate(tmp_path):
    out = tmp_path / "run.xml"
    args = ["run", "--op", "norm_modulate", "--case", "1", "--mode", "plain", "--device", "cpu", "--repeats", "1"]
    args += ["--candidate", "order_follows_batch", "--out", str(tmp_path), "-q"]
    args += ["--fail-on", "differ", "--junit", str(out)]
    done = audit_in_process(*args, env={"AUDIT_PLUGINS": "tests.plugins.planted"})
    assert done.returncode == 1, done.stderr[-2000:]
    xml = out.read_text()
    validate(xml)
    failed = {(c.get("classname"), c.get("name")) for c in failures(xml)}
    planted = {
        ("norm_modulate.order_follows_batch", "verdict vs diffusers"),
        ("norm_modulate.order_follows_batch vs diffusers", "case 1 · out"),
    }
    assert planted <= failed
