"""The closing summary of a command that wrote reports (``reports.summary``), on committed reports."""

import json

from reports.diff import diff_sets
from reports.io import load_report, load_set
from reports.kinds import kind_of
from reports.summary import recap, report_line
from tests.helpers import FIXTURES, REPO, load

B200_GATE = FIXTURES / "h3_bitwise_reuse.gate_residual.json"
H200 = REPO / "docs" / "evidence" / "h200"


def test_one_line_per_report_counts_its_verdicts_passing_first_unavailable_last():
    assert report_line(load_report(B200_GATE)) == "gate_residual: 1 forward only"
    line = report_line(load_report(H200 / "h3_bitwise_reuse.timestep_mlp.json"))
    assert line.startswith("timestep_mlp: ") and line.endswith("unavailable")
    report = load_report(H200 / "h3_bitwise_reuse.timestep_mlp.json")
    counts = [part.split(" ", 1) for part in line.removeprefix("timestep_mlp: ").split(", ")]
    assert sum(int(n) for n, _ in counts) == len(kind_of(report).verdicts(report.root))


def test_a_recap_across_reports_names_those_with_a_difference():
    reports = [load_report(p) for p in sorted(FIXTURES.glob("h3_bitwise_reuse.*.json"))]
    line = recap(reports)
    assert line.startswith("4 reports: ") and "differences in " in line
    assert recap(reports[:1]) is None


def test_the_first_regression_is_named_with_its_tensor_and_states(tmp_path):
    data = load(H200 / "h3_bitwise_reuse.gate_residual.json")
    for name, ref in (("diffusers", "rl_kernel"), ("rl_kernel", "diffusers")):  # both directions agree
        cmp = data["results"][name][f"vs {ref}"]["257"]["out"][0]
        cmp.update(equal=False, differ=1, max_abs=0.5, first_differ=[0, 0], ulp_max=1, ulp_hist={"1": 1})
    (tmp_path / "new.json").write_text(json.dumps(data))
    diff = diff_sets(load_set(H200 / "h3_bitwise_reuse.gate_residual.json"), load_set(tmp_path / "new.json"))
    assert diff.regressed
    assert diff.first().startswith("gate_residual: diffusers vs rl_kernel, case 257, out: equal")
    assert diff_sets(load_set(B200_GATE), load_set(B200_GATE)).first() is None
