import json
import subprocess
import sys

import torch

from audit.core.inputs import draw_grad_out, draw_inputs, fingerprint, packed_index, seeded_normal
from audit.core.ops import OPS, TABLE_ROWS

PROBE = (
    "import json; from audit.core.ops import OPS\n"
    "from audit.core.inputs import draw_inputs, draw_grad_out, fingerprint\n"
    "out = {}\n"
    "for name, rows in [('norm_modulate', 257), ('gate_residual', 33), ('timestep_mlp', 4)]:\n"
    "    t = draw_inputs(OPS[name], rows, seed=rows); t['grad_out'] = draw_grad_out(OPS[name], rows, rows)\n"
    "    out[name] = fingerprint(t)\n"
    "print(json.dumps(out))\n"
)


def _fingerprints_in_new_process() -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_inputs_are_identical_across_processes():
    assert _fingerprints_in_new_process() == _fingerprints_in_new_process()


def test_inputs_follow_the_spec_shapes_and_dtypes():
    for op in OPS.values():
        rows = 3
        t = draw_inputs(op, rows, seed=7)
        assert list(t) == [i.name for i in op.inputs]
        for spec in op.inputs:
            assert tuple(t[spec.name].shape) == spec.shape(rows)
            assert t[spec.name].dtype == spec.dtype
        assert draw_grad_out(op, rows, 7).shape == op.out_shape(rows)


def test_upstream_convention_rn():
    g = torch.Generator().manual_seed(5 * 1000 + 10)
    expected = (torch.randn((4, 8), generator=g) * 2.0).to(torch.bfloat16)
    assert torch.equal(seeded_normal(5, 10, (4, 8), torch.bfloat16, 2.0), expected)


def test_parameters_do_not_depend_on_the_case_seed_but_rows_do():
    op = OPS["norm_modulate"]
    a, b = draw_inputs(op, 8, seed=3), draw_inputs(op, 8, seed=4)
    for name in ("w", "sh", "sc"):
        assert torch.equal(a[name], b[name])
    assert not torch.equal(a["x"], b["x"])
    assert bool((a["w"].float() >= 0.5).all()) and bool((a["w"].float() <= 1.5).all())


def test_inputs_shared_across_cases_are_drawn_once_with_the_same_bits():
    for op in (OPS["norm_modulate"], OPS["timestep_mlp"]):  # tables; weights (adaln's are 520 MB)
        shared: dict = {}
        for rows in (1, 3, 8):
            kept, fresh = draw_inputs(op, rows, seed=rows, shared=shared), draw_inputs(op, rows, seed=rows)
            assert fingerprint(kept) == fingerprint(fresh), (op.name, rows)
        again = draw_inputs(op, 5, seed=5, shared=shared)
        for spec in op.inputs:  # a parameter is the very tensor drawn for the first case; rows are drawn anew
            assert (again[spec.name] is shared.get((spec.name, spec.shape(5)))) == (not spec.rows), (op.name, spec.name)


def test_packed_index_covers_every_modality_first_and_stays_in_the_table():
    idx = packed_index(11, 1000)
    assert idx.dtype == torch.int64
    assert [int(i) % 3 for i in idx[:3]] == [0, 1, 2]
    assert int(idx.min()) >= 0 and int(idx.max()) < TABLE_ROWS
    assert int(packed_index(11, 1)[0]) % 3 == 0


def test_fingerprint_sees_one_flipped_bit():
    t = {"x": torch.zeros(16, dtype=torch.bfloat16)}
    u = {"x": t["x"].clone()}
    u["x"].view(torch.int16)[3] = 1
    assert fingerprint(t) != fingerprint(u)
    assert fingerprint(t) == fingerprint({"x": t["x"].clone()})


def test_the_inputs_drawn_here_are_those_the_committed_h200_reports_compared():
    """The CPU draws every case's inputs (then moves them), so a change in the drawing shows here
    before a GPU run's gate meets a baseline of other inputs; the cases up to 300 rows of each op."""
    from tests.helpers import REPO

    for op in ("norm_modulate", "gate_residual", "timestep_mlp", "adaln_projection"):
        report = json.loads((REPO / "docs/evidence/h200" / f"h3_bitwise_reuse.{op}.json").read_text())
        shared: dict = {}
        small = {c: sha for c, sha in report["inputs_sha256"].items() if int(c) <= 300}
        assert small, op
        for case, sha in small.items():
            assert fingerprint(draw_inputs(OPS[op], int(case), seed=int(case), shared=shared)) == sha, (op, case)
