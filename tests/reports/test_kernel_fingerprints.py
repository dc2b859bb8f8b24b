"""The report's kernel fingerprints: the compact form, its validation, ``audit show --kernels`` and
the labels kernels are shown by."""

import copy

import pytest

from tests.helpers import SEEDS, load
from reports.bitwise import compact_kernels, kernels_by_case
from reports.changes import kernel_changes, kernel_labels
from reports.io import ReportError, parse_report
from reports.render import View, sections

GATE = SEEDS[1]  # gate_residual, candidates diffusers and rl_kernel


def _with_prints(data: dict, found: dict) -> dict:
    data = copy.deepcopy(data)
    names, compact = compact_kernels(found)
    data["kernel_names"] = names
    for name, cases in compact.items():
        data["results"][name]["kernels"] = cases
    return data


FOUND = {
    "diffusers": {
        "257": {"forward": {"aten::mul": 1, "aten::add": 1}, "backward": {"AddBackward0": 1}},
        "4097": {"unavailable": "no kernel fingerprint: planted"},
    },
    "rl_kernel": {"257": {"forward": {"gate_kernel": 2}, "backward": {}}},
}


def test_fingerprints_round_trip_through_the_table_of_names():
    data = _with_prints(load(GATE), FOUND)
    assert data["kernel_names"] == ["AddBackward0", "aten::add", "aten::mul", "gate_kernel"]
    report = parse_report(data, "r.json").root
    assert report.model_dump(mode="json") == data
    assert kernels_by_case(report, "diffusers") == {
        "257": {"forward": {"aten::mul": 1, "aten::add": 1}, "backward": {"AddBackward0": 1}},
        "4097": "no kernel fingerprint: planted",
    }
    assert kernels_by_case(report, "rl_kernel") == {"257": {"forward": {"gate_kernel": 2}, "backward": {}}}


@pytest.mark.parametrize("pair", [[4, 1], [0, 0]], ids=["index past the table", "no launch"])
def test_a_pair_that_names_no_kernel_launch_is_refused_with_its_path(pair):
    data = _with_prints(load(GATE), FOUND)
    data["results"]["diffusers"]["kernels"]["257"]["forward"][0] = pair
    with pytest.raises(ReportError) as info:
        parse_report(data, "r.json")
    (where, _), *_ = info.value.problems
    assert where == '$.results.diffusers.kernels["257"].forward[0]'


def test_fingerprints_without_names_are_refused():
    data = _with_prints(load(GATE), FOUND)
    del data["kernel_names"]
    with pytest.raises(ReportError, match="kernel fingerprints need kernel_names"):
        parse_report(data, "r.json")


def _text(drawn) -> str:
    return "\n".join(f"{s.title} {s.note} " + " ".join(c.text for row in s.rows for c in row) for s in drawn)


def test_show_kernels_draws_each_candidates_phases_or_says_there_are_none():
    report = parse_report(_with_prints(load(GATE), FOUND), "r.json")
    shown = _text(sections(report, View(kernels=True)))
    assert "diffusers: kernels" in shown and "1× aten::mul\n1× aten::add" in shown
    assert "unavailable: no kernel fingerprint: planted" in shown and "2× gate_kernel" in shown
    assert "kernels" not in _text(sections(report, View())).replace("rl_kernel", "")
    bare = parse_report(load(GATE), "r.json")
    assert "this report has no kernel fingerprints" in _text(sections(bare, View(kernels=True)))


FWD = "void rlk::(anonymous namespace)::norm_modulate_fwd_kernel<12, true>(unsigned short const*, long, float)"
SORT = (
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::Functor>"
    "(at::TensorIteratorBase&, at::native::Functor const&)::{lambda(int)#1}>(int, at::native::Functor)"
)


def test_kernel_labels_drop_the_parameter_list_void_and_anonymous_namespaces_only():
    assert kernel_labels([FWD, SORT, "Memcpy DtoD (Device -> Device)", "aten::add"]) == {
        FWD: "rlk::norm_modulate_fwd_kernel<12, true>",
        SORT: "at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::Functor>"
        "(at::TensorIteratorBase&, at::native::Functor const&)::{lambda(int)#1}>",
        "Memcpy DtoD (Device -> Device)": "Memcpy DtoD (Device -> Device)",
        "aten::add": "aten::add",
    }


def test_kernels_whose_labels_coincide_keep_their_full_names():
    one, other = "void k<1>(int)", "void k<1>(float)"
    assert kernel_labels([one, other, "void j(int)"]) == {one: one, other: other, "void j(int)": "j"}


def test_kernel_changes_and_show_kernels_print_labels():
    old = {"257": {"forward": {FWD: 1}, "backward": {}}}
    new = {"257": {"forward": {FWD: 2}, "backward": {}}}
    (change,) = kernel_changes(old, new, candidate="rl_kernel")
    assert (change.old, change.new) == (
        "1× rlk::norm_modulate_fwd_kernel<12, true>",
        "2× rlk::norm_modulate_fwd_kernel<12, true>",
    )
    report = parse_report(_with_prints(load(GATE), {"rl_kernel": new}), "r.json")
    shown = _text(sections(report, View(kernels=True)))
    assert "2× rlk::norm_modulate_fwd_kernel<12, true>" in shown and "unsigned short" not in shown
