"""CPU tests of rl_kernel_ops.reference_rows: the PyTorch replay of the row kernels' algorithms.

Checked: the replayed summation order against a scalar simulation of the kernel's threads; exact
equalities (gather forward, gate_residual forward and d_res/d_y, the norm_modulate formula, the
segmented sums' fixed order); agreement with eager autograd and FP64 to tolerance; determinism;
batch invariance; input validation.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from audit.core.inputs import packed_index, seeded_normal
from rl_kernel_ops import _build, cuda_rows
from rl_kernel_ops import reference_rows as ref

H = 5376
R = 9
EPS = 1e-5
BF16 = torch.bfloat16


def bf16_normal(seed: int, salt: int, shape, scale: float = 1.0) -> torch.Tensor:
    return seeded_normal(seed, salt, shape, BF16, scale)


def norm_inputs(rows: int, seed: int = 3, hidden: int = H):
    w = (0.5 + torch.rand(hidden, generator=torch.Generator().manual_seed(1011))).to(BF16)
    return dict(
        x=bf16_normal(seed, 10, (rows, hidden), 2.0),
        w=w,
        shift=bf16_normal(1, 12, (R, hidden), 0.1),
        scale=bf16_normal(1, 13, (R, hidden), 0.1),
        idx=packed_index(seed, rows),
    )


def gate_inputs(rows: int, seed: int = 3, hidden: int = H):
    return dict(
        res=bf16_normal(seed, 15, (rows, hidden)),
        y=bf16_normal(seed, 16, (rows, hidden)),
        gate=bf16_normal(1, 17, (R, hidden), 0.1),
        idx=packed_index(seed, rows),
    )


def gather_inputs(rows: int, seed: int = 3, hidden: int = H):
    return dict(table=bf16_normal(1, 18, (R, hidden)), idx=packed_index(seed, rows))


OPS = {
    "norm_modulate": (lambda t: ref.norm_modulate(t["x"], t["w"], t["shift"], t["scale"], t["idx"], EPS), norm_inputs),
    "gate_residual": (lambda t: ref.gate_residual(t["res"], t["y"], t["gate"], t["idx"]), gate_inputs),
    "adaln_row_gather": (lambda t: ref.adaln_row_gather(t["table"], t["idx"]), gather_inputs),
}
ROW_INPUTS = {"norm_modulate": ("x",), "gate_residual": ("res", "y"), "adaln_row_gather": ()}


def run(op: str, inputs: dict, grad_out: torch.Tensor):
    """Output and the gradient of every floating input, for a fixed upstream gradient."""
    fn, _ = OPS[op]
    leaves = {k: v.clone().requires_grad_(v.is_floating_point()) for k, v in inputs.items()}
    out = fn(leaves)
    names = [k for k, v in leaves.items() if v.requires_grad]
    grads = torch.autograd.grad(out, [leaves[k] for k in names], grad_out)
    return out.detach(), dict(zip(names, grads))


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    view = {BF16: torch.int16, torch.float32: torch.int32}[a.dtype]
    return torch.equal(a.contiguous().view(view), b.contiguous().view(view))


def rel_err(a: torch.Tensor, exact: torch.Tensor) -> float:
    return ((a.double() - exact).abs().max() / exact.abs().max()).item()


# ---------------------------------------------------------------- the replayed summation order


def simulated_row_sum(row: np.ndarray, vec: int) -> np.float32:
    """Scalar float32 simulation of the kernel: 128 threads, vec-element vectors round-robin,
    per-thread sums in order, a shuffle-down tree per warp, then (w0 + w2) + (w1 + w3)."""
    nvec = row.size // vec
    lanes = []
    for t in range(128):
        acc = np.float32(0)
        for i in range(t, nvec, 128):
            for e in range(vec):
                acc = np.float32(acc + row[vec * i + e])
        lanes.append(acc)
    warps = []
    for w in range(4):
        v = lanes[32 * w : 32 * w + 32]
        offset = 16
        while offset:
            v = [np.float32(v[i] + v[i + offset]) if i + offset < 32 else v[i] for i in range(32)]
            offset //= 2
        warps.append(v[0])
    return np.float32(np.float32(warps[0] + warps[2]) + np.float32(warps[1] + warps[3]))


@pytest.mark.parametrize("vec", [4, 8])
@pytest.mark.parametrize("hidden", [8, 520, 1032, H])
def test_replay_row_sum_is_the_kernel_order(hidden, vec):
    v = torch.randn(3, hidden, generator=torch.Generator().manual_seed(hidden)) * 1e3
    got = ref.replay_row_sum(v, vec)
    for r in range(3):
        assert got[r].item() == float(simulated_row_sum(v[r].numpy(), vec))


def test_rms_rstd_close_to_fp64():
    x = norm_inputs(64)["x"]
    exact = torch.rsqrt((x.double() ** 2).mean(-1) + EPS)
    assert rel_err(ref.rms_rstd(x, EPS), exact) < 1e-6


# ---------------------------------------------------------------- exact equalities


def test_norm_modulate_forward_is_the_rounded_formula():
    t = norm_inputs(257)
    out = ref.norm_modulate(**t, eps=EPS)
    rstd = ref.rms_rstd(t["x"], EPS)
    n = (t["w"].float() * (rstd[:, None] * t["x"].float())).to(BF16)
    p = (1.0 + t["scale"].float()).to(BF16)
    m = (n.float() * p[t["idx"]].float()).to(BF16)
    expected = (m.float() + t["shift"][t["idx"]].float()).to(BF16)
    assert same_bits(out, expected)


def test_gate_residual_forward_and_row_grads_equal_eager():
    t = gate_inputs(257)
    g = bf16_normal(3, 99, (257, H))
    out, grads = run("gate_residual", t, g)
    res, y, gate = (t[k].clone().requires_grad_() for k in ("res", "y", "gate"))
    eager = res + gate.index_select(0, t["idx"]) * y
    e_res, e_y = torch.autograd.grad(eager, (res, y), g)
    assert same_bits(out, eager.detach())
    assert same_bits(grads["res"], e_res) and same_bits(grads["y"], e_y)


def test_gather_forward_is_index_select():
    t = gather_inputs(257)
    out, _ = run("adaln_row_gather", t, bf16_normal(3, 99, (257, H)))
    assert same_bits(out, t["table"].index_select(0, t["idx"]))


def naive_segment_sum(terms: torch.Tensor, idx: torch.Tensor, rows: int) -> torch.Tensor:
    """The documented order, one scalar row at a time: positions of table row k in ascending
    order, tiles of TILE_ROWS summed from 0, tiles folded from 0, all in FP32."""
    out = torch.zeros(rows, terms.shape[1])
    for k in range(rows):
        positions = (idx == k).nonzero().flatten().tolist()
        total = torch.zeros(terms.shape[1])
        for start in range(0, len(positions), ref.TILE_ROWS):
            tile = torch.zeros(terms.shape[1])
            for p in positions[start : start + ref.TILE_ROWS]:
                tile = tile + terms[p]
            total = total + tile
        out[k] = total
    return out


@pytest.mark.parametrize("table_rows", [9, 256, 257, 32768, 40000])
def test_the_plans_narrow_sort_keys_give_the_int64_sorts_permutation(table_rows):
    """cuda_rows sorts idx on the narrowest integer type holding every table row: the stable sort
    of the narrowed keys is the permutation of idx's own, for table rows at each type's edge."""
    gen = torch.Generator().manual_seed(table_rows)
    idx = torch.randint(0, table_rows, (5000,), generator=gen)
    idx[:2] = torch.tensor([0, table_rows - 1])
    narrow = idx.to(cuda_rows._sort_key_dtype(table_rows))
    assert torch.equal(narrow.long(), idx)
    assert torch.equal(torch.sort(narrow, stable=True).indices, torch.sort(idx, stable=True).indices)


def test_the_plan_limits_are_the_kernels():
    """cuda_rows chooses the kernels' plan (row_sort_plan, the forward's sort) by the limits that
    the C++ checks enforce, and its tiles fit the kernels' shared memory: each Python constant is
    read against its constexpr in csrc, so a change on one side alone fails here, on a CPU."""

    def constexpr(file: str, name: str) -> int:
        found = re.search(rf"constexpr int {name} = (\d+);", (_build.CSRC / file).read_text())
        assert found, f"{name} not in {file}"
        return int(found.group(1))

    assert constexpr("row_sort.cuh", "kSortMaxKeys") == cuda_rows.SORT_PLAN_MAX_TABLE_ROWS
    assert constexpr("row_sort.cuh", "kSortMaxRows") == cuda_rows.SORT_PLAN_MAX_ROWS
    assert constexpr("norm_modulate.cu", "kFwdPlanMaxRows") == cuda_rows.FORWARD_PLAN_MAX_ROWS
    assert ref.TILE_ROWS <= constexpr("rows_common.cuh", "kMaxTileRows")


def test_segmented_sums_follow_the_documented_order():
    rows, hidden = 300, 64  # ~100 positions per table row: two tiles each, the second partial
    idx = torch.randint(0, 3, (rows,), generator=torch.Generator().manual_seed(5))
    t_gather = dict(table=bf16_normal(1, 18, (3, hidden)), idx=idx)
    t_gate = dict(
        res=bf16_normal(3, 15, (rows, hidden)),
        y=bf16_normal(3, 16, (rows, hidden)),
        gate=bf16_normal(1, 17, (3, hidden)),
        idx=idx,
    )
    g = bf16_normal(3, 99, (rows, hidden)) * 8
    _, gg = run("adaln_row_gather", t_gather, g)
    assert same_bits(gg["table"], naive_segment_sum(g.float(), idx, 3).to(BF16))
    _, gr = run("gate_residual", t_gate, g)
    assert same_bits(gr["gate"], naive_segment_sum(g.float() * t_gate["y"].float(), idx, 3).to(BF16))
    t_norm = norm_inputs(rows, hidden=hidden)
    t_norm.update(idx=idx, shift=t_norm["shift"][:3], scale=t_norm["scale"][:3])
    _, gn = run("norm_modulate", t_norm, g)
    assert same_bits(gn["shift"], naive_segment_sum(g.float(), idx, 3).to(BF16))


# ---------------------------------------------------------------- tolerance: eager and FP64


def fp64_norm_modulate(t):
    x, w, sh, sc = (t[k].double().requires_grad_() for k in ("x", "w", "shift", "scale"))
    idx = t["idx"]
    out = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * w * (1 + sc[idx]) + sh[idx]
    return out, dict(x=x, w=w, shift=sh, scale=sc)


def test_norm_modulate_close_to_eager_and_fp64():
    rows = 257
    t = norm_inputs(rows)
    g = bf16_normal(3, 99, (rows, H))
    out, grads = run("norm_modulate", t, g)
    eager = F.rms_norm(t["x"], (H,), t["w"], EPS) * (1.0 + t["scale"][t["idx"]]) + t["shift"][t["idx"]]
    torch.testing.assert_close(out.float(), eager.float(), rtol=2**-7, atol=2**-6)
    exact, leaves = fp64_norm_modulate(t)
    assert rel_err(out, exact.detach()) < 1.5e-2
    exact_grads = torch.autograd.grad(exact, list(leaves.values()), g.double())
    for name, e in zip(leaves, exact_grads):
        assert rel_err(grads[name], e) < 1e-2, name


def test_gate_and_gather_table_grads_close_to_fp64():
    rows = 257
    g = bf16_normal(3, 99, (rows, H))
    t = gate_inputs(rows)
    _, grads = run("gate_residual", t, g)
    exact = torch.zeros(R, H, dtype=torch.float64).index_add_(0, t["idx"], g.double() * t["y"].double())
    assert rel_err(grads["gate"], exact) < 4e-3
    t = gather_inputs(rows)
    _, grads = run("adaln_row_gather", t, g)
    exact = torch.zeros(R, H, dtype=torch.float64).index_add_(0, t["idx"], g.double())
    assert rel_err(grads["table"], exact) < 4e-3


# ---------------------------------------------------------------- determinism and batch invariance


@pytest.mark.parametrize("op", list(OPS))
def test_deterministic(op):
    t = OPS[op][1](257)
    g = bf16_normal(3, 99, (257, H))
    out1, g1 = run(op, t, g)
    out2, g2 = run(op, t, g)
    assert same_bits(out1, out2)
    assert g1.keys() == g2.keys() and all(same_bits(g1[k], g2[k]) for k in g1)


def slice_rows(op: str, t: dict, rows) -> dict:
    return {k: (v[rows] if k in ROW_INPUTS[op] or k == "idx" else v) for k, v in t.items()}


@pytest.mark.parametrize("op", list(OPS))
def test_batch_invariant(op):
    n = 64
    t = OPS[op][1](n, seed=4)
    g = bf16_normal(4, 99, (n, H))
    full_out, full_grads = run(op, t, g)
    checks = [slice(i, i + 1) for i in range(n)] + [slice(0, 7), slice(13, 50), slice(n - 1, n)]
    for rows in checks:
        out, grads = run(op, slice_rows(op, t, rows), g[rows])
        assert same_bits(out, full_out[rows]), rows
        for name in ROW_INPUTS[op]:
            assert same_bits(grads[name], full_grads[name][rows]), (name, rows)
    rev = torch.arange(n - 1, -1, -1)
    out, grads = run(op, slice_rows(op, t, rev), g[rev])
    assert same_bits(out, full_out[rev])
    for name in ROW_INPUTS[op]:
        assert same_bits(grads[name], full_grads[name][rev]), name


@pytest.mark.parametrize("op", list(OPS))
def test_empty_batch(op):
    t = OPS[op][1](3)
    t = {k: (v[:0] if k in ROW_INPUTS[op] or k == "idx" else v) for k, v in t.items()}
    out, grads = run(op, t, torch.zeros(0, H, dtype=BF16))
    assert out.shape == (0, H)
    for name, grad in grads.items():
        assert grad.shape == t[name].shape
        if name not in ROW_INPUTS[op]:
            assert not grad.float().abs().sum()


# ---------------------------------------------------------------- validation


def test_rejects_bad_inputs():
    t = norm_inputs(4)
    nm = lambda **kw: ref.norm_modulate(**{**t, **kw}, eps=EPS)  # noqa: E731
    with pytest.raises(TypeError):
        nm(x=t["x"].float())
    with pytest.raises(TypeError):
        nm(idx=t["idx"].int())
    with pytest.raises(TypeError):
        ref.norm_modulate(**t, eps="1e-5")
    with pytest.raises(ValueError):
        nm(w=t["w"][:-8])
    with pytest.raises(ValueError):
        nm(idx=t["idx"][:3])
    with pytest.raises(ValueError):
        nm(idx=torch.tensor([0, 1, 2, R]))
    with pytest.raises(ValueError):
        nm(idx=torch.tensor([0, -1, 2, 3]))
    with pytest.raises(ValueError):
        nm(x=t["x"][:, :12], w=t["w"][:12], shift=t["shift"][:, :12], scale=t["scale"][:, :12])
    with pytest.raises(ValueError):
        nm(
            x=torch.zeros(4, 16392, dtype=BF16),
            w=torch.ones(16392, dtype=BF16),
            shift=torch.zeros(R, 16392, dtype=BF16),
            scale=torch.zeros(R, 16392, dtype=BF16),
        )
    g = gate_inputs(4)
    with pytest.raises(ValueError):
        ref.gate_residual(g["res"], g["y"][:3], g["gate"], g["idx"])
    with pytest.raises(ValueError):
        ref.gate_residual(g["res"], g["y"], g["gate"][:2], g["idx"])
    with pytest.raises(TypeError):
        ref.adaln_row_gather(g["gate"].float(), g["idx"])
    with pytest.raises(TypeError):
        ref.adaln_row_gather(g["gate"], [0, 1])


def test_index_checked_again_after_an_in_place_change():
    t = gather_inputs(8)
    ref.adaln_row_gather(t["table"], t["idx"])  # passes and is remembered
    t["idx"][3] = R
    with pytest.raises(ValueError):
        ref.adaln_row_gather(t["table"], t["idx"])
