"""The ``h3_denoising_trajectory`` report's own rules: its summary follows the steps (first stably
differing step; the trend from there to the last step), a non-repeatable step is never drift, and
the diff names a step whose state changed."""

import copy
import json

import pytest
from reports.diff import diff_sets
from reports.io import ReportError, load_set, parse_report
from reports.kinds import KINDS
from reports.trajectory import Step, Trajectory
from tests.helpers import FIXTURES, load

PLANTED = FIXTURES / "trajectory" / "h3_denoising_trajectory.planted.json"


def _run(data: dict) -> dict:
    return data["results"]["plain"]["lengths"]["17"]


def test_the_fixture_differs_first_at_its_planted_step():
    run = _run(load(PLANTED))
    assert run["first_differ"] == 3 and all(s["cmp"]["equal"] for s in run["steps"][:3])


def test_a_summary_that_does_not_follow_the_steps_is_invalid():
    data = load(PLANTED)
    _run(data)["first_differ"] = 2
    with pytest.raises(ReportError, match="first_differ is 2, but the steps give 3"):
        parse_report(data)


@pytest.mark.parametrize("last, trend", [(1e-3, "grows"), (1e-4, "stays"), (4e-5, "fades"), (0.0, "fades")])
def test_the_trend_compares_the_last_step_with_the_first_differing_one(last, trend):
    steps = [Step.model_validate(s) for s in _run(load(PLANTED))["steps"]]  # step 3: 1.06e-4
    steps[-1] = steps[-1].model_copy(update={"rel_max_abs": last})
    assert Trajectory.summary(steps) == {"first_differ": 3, "trend": trend}


def test_a_non_repeatable_step_is_not_drift():
    data = load(PLANTED)
    run = _run(data)
    for s in run["steps"][3:]:
        s["cmp"] |= {"repeatable": False, "repeat_differ": 1}
    run["first_differ"], run["trend"] = None, None
    report = parse_report(data).root
    assert [v.verdict for v in KINDS[report.kind].verdicts(report)] == ["nondeterministic"]


def test_the_diff_names_the_step_that_changed(tmp_path):
    data = load(PLANTED)
    run = _run(data)
    run["steps"][0] = copy.deepcopy(run["steps"][3])
    run |= Trajectory.summary([Step.model_validate(s) for s in run["steps"]])
    new = tmp_path / "new.json"
    new.write_text(json.dumps(data))
    found = diff_sets(load_set(PLANTED), load_set(new))
    assert [c.tensor for o in found.ops for c in o.changes] == ["step 0"]
