"""``audit.parent.chain``'s assembly of the mode workers' findings, without running a worker."""

import json

from audit.parent.chain import mode_results
from reports.kinds import Report
from tests.helpers import REPO

LIGER = REPO / "docs/evidence/h200/chain/h3_conditioning_chain_replay.liger.json"


def test_a_length_a_worker_wrote_nothing_for_is_unavailable_saying_so_and_the_report_valid():
    report = json.loads(LIGER.read_text())
    plain = report["results"]["plain"]
    found = {  # the worker's findings, as it writes them, without length 4097
        "plain": {
            "description": plain["description"],
            "inputs_sha256": {"257": report["inputs_sha256"]["257"]},
            "lengths": {"257": plain["lengths"]["257"]},
        }
    }
    _, results, _ = mode_results({"lengths": [257, 4097], "device": "cpu"}, found, {"plain": {}}, lambda data: {})
    assert results["plain"]["lengths"]["4097"] == {"unavailable": "mode plain's worker wrote no result for length 4097"}
    assert results["plain"]["lengths"]["257"] == plain["lengths"]["257"]
    report["results"] = results
    assert Report.model_validate(report).root.lengths == [257, 4097]  # every mode holds every length
