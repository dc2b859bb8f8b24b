"""GPU tests of the row kernels (rl_kernel_ops.cuda_rows), the contracts of ``rl_kernel_ops``:

- forwards bitwise equal to the eager BF16 expressions (norm_modulate, gate_residual) and to
  index_select (gather); the RMS statistic bitwise equal to torch's own CUDA RMSNorm statistic;
- gate_residual d_res and d_y bitwise equal to eager autograd;
- the PyTorch reference run on the same GPU gives the same bits for every output and gradient,
  and the CPU reference agrees (bitwise wherever the CPU's rsqrt agrees);
- deterministic over repeated runs; batch-invariant (each row alone vs inside batches of 64, 257
  and 2048, contiguous sub-batches, the batch reversed);
- accuracy against FP64 at least as good as eager's (numbers printed);
- bad inputs raise TypeError/ValueError before any launch; no floating-point atomic in any row
  kernel (the counting sort's integer counts in shared memory are the only atomics).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.cuda

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from audit.core.inputs import packed_index, seeded_normal  # noqa: E402
from rl_kernel_ops import _build, cuda_rows, reference_rows  # noqa: E402

H = 5376
R = 9
EPS = 1e-5
BF16 = torch.bfloat16
DEV = "cuda"


@pytest.fixture(scope="module", autouse=True)
def extension():
    start = time.perf_counter()
    _build.load_extension()
    print(f"\nload_extension: {time.perf_counter() - start:.1f} s")


def bf16_normal(seed: int, salt: int, shape, scale: float = 1.0) -> torch.Tensor:
    return seeded_normal(seed, salt, shape, BF16, scale)


def inputs(op: str, rows: int, seed: int = 3, device: str = DEV) -> dict:
    idx = packed_index(seed, rows)
    if op == "norm_modulate":
        w = (0.5 + torch.rand(H, generator=torch.Generator().manual_seed(1011))).to(BF16)
        t = dict(
            x=bf16_normal(seed, 10, (rows, H), 2.0),
            w=w,
            shift=bf16_normal(1, 12, (R, H), 0.1),
            scale=bf16_normal(1, 13, (R, H), 0.1),
            idx=idx,
        )
    elif op == "gate_residual":
        t = dict(
            res=bf16_normal(seed, 15, (rows, H)),
            y=bf16_normal(seed, 16, (rows, H)),
            gate=bf16_normal(1, 17, (R, H), 0.1),
            idx=idx,
        )
    else:  # one (9, 6H) table, as the six fused AdaLN gathers
        t = dict(table=bf16_normal(1, 18, (R, 6 * H)), idx=idx)
    return {k: v.to(device) for k, v in t.items()}


def grad_out(op: str, rows: int, seed: int = 3, device: str = DEV) -> torch.Tensor:
    return bf16_normal(seed, 99, (rows, 6 * H if op == "adaln_row_gather" else H)).to(device)


OPS = ("norm_modulate", "gate_residual", "adaln_row_gather")
ROW_INPUTS = {"norm_modulate": ("x",), "gate_residual": ("res", "y"), "adaln_row_gather": ()}


def call(module, op: str, t: dict):
    if op == "norm_modulate":
        return module.norm_modulate(t["x"], t["w"], t["shift"], t["scale"], t["idx"], EPS)
    if op == "gate_residual":
        return module.gate_residual(t["res"], t["y"], t["gate"], t["idx"])
    return module.adaln_row_gather(t["table"], t["idx"])


def eager(op: str, t: dict):
    idx = t["idx"]
    if op == "norm_modulate":
        return F.rms_norm(t["x"], (H,), t["w"], EPS) * (1.0 + t["scale"].index_select(0, idx)) + t[
            "shift"
        ].index_select(0, idx)
    if op == "gate_residual":
        return t["res"] + t["gate"].index_select(0, idx) * t["y"]
    return t["table"].index_select(0, idx)


def run(fn, t: dict, g: torch.Tensor):
    """fn's output and the gradients of all floating inputs for the upstream gradient g."""
    leaves = {k: v.detach().clone().requires_grad_(v.is_floating_point()) for k, v in t.items()}
    out = fn(leaves)
    names = [k for k, v in leaves.items() if v.requires_grad]
    grads = torch.autograd.grad(out, [leaves[k] for k in names], g)
    return out.detach(), dict(zip(names, grads))


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view({BF16: torch.int16, torch.float32: torch.int32}[t.dtype])


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(bits(a), bits(b.to(a.device)))


def differ(a: torch.Tensor, b: torch.Tensor) -> int:
    return int((bits(a) != bits(b.to(a.device))).sum())


# ---------------------------------------------------------------- bitwise equal to eager


@pytest.mark.parametrize("rows", [1, 257, 4097])
def test_rstd_is_torchs_cuda_rmsnorm_statistic(rows):
    t = inputs("norm_modulate", rows)
    _, torch_rstd = torch._fused_rms_norm(t["x"], [H], t["w"], EPS)
    _, ours = torch.ops.rl_kernel_ops.norm_modulate_fwd(t["x"], t["w"], t["shift"], t["scale"], t["idx"], EPS)
    assert same_bits(ours, torch_rstd.flatten())
    # the Python replay of the order, run on the GPU (torch.rsqrt is rsqrtf there), agrees too
    assert same_bits(reference_rows.rms_rstd(t["x"], EPS), torch_rstd.flatten())


@pytest.mark.parametrize("rows", [1, 257, 4097, 32768])
@pytest.mark.parametrize("op", OPS)
def test_forward_bitwise_equal_to_eager(op, rows):
    t = inputs(op, rows)
    with torch.no_grad():
        assert same_bits(call(cuda_rows, op, t), eager(op, t))


@pytest.mark.parametrize("op", OPS)
def test_no_rows_give_eagers_output_and_gradients(op):
    t, g = inputs(op, 0), grad_out(op, 0)
    out, grads = run(lambda v: call(cuda_rows, op, v), t, g)
    e_out, e_grads = run(lambda v: eager(op, v), t, g)
    assert same_bits(out, e_out)
    for name in grads:
        assert same_bits(grads[name], e_grads[name]), name


def spread_bf16(gen, shape, lo: int, hi: int) -> torch.Tensor:
    """Random signs and magnitudes 2^U(lo, hi) * U(1, 2), rounded to BF16 (subnormals below 2^-126)."""
    sign = torch.where(torch.rand(shape, generator=gen) < 0.5, -1.0, 1.0)
    e = torch.randint(lo, hi, shape, generator=gen).float()
    return (sign * torch.exp2(e) * (1 + torch.rand(shape, generator=gen))).to(BF16)


@pytest.mark.parametrize("seed", [0, 1])
def test_norm_modulate_forward_bitwise_equal_to_eager_over_the_bf16_range(seed):
    """The forward against eager, bitwise, where the products and sums leave the normal range: x over
    2^-140 ... 2^40 with rows of subnormals only (products n * p below 2^-126), rows of zeros, rows
    with one NaN, inf or -inf; w over 2^-30 ... 2^10; scale near -1 (1 + scale small or 0), tiny or
    large; shift over 2^-140 ... 2^30."""
    gen = torch.Generator().manual_seed(seed)
    rows = 256
    x = spread_bf16(gen, (rows, H), -140, 40)
    kind = torch.randint(0, 10, (rows,), generator=gen)
    x[kind == 0] = spread_bf16(gen, (int((kind == 0).sum()), H), -140, -100)
    x[kind == 1] = 0
    for r in torch.nonzero(kind == 2).flatten().tolist():
        x[r, r * 37 % H] = (float("nan"), float("inf"), float("-inf"))[r % 3]
    near_minus_one = (-1 + torch.randint(-8, 9, (R, H), generator=gen).float() * 2.0**-8).to(BF16)
    which = torch.randint(0, 3, (R, H), generator=gen)
    scale = torch.where(
        which == 0,
        near_minus_one,
        torch.where(which == 1, spread_bf16(gen, (R, H), -140, -10), spread_bf16(gen, (R, H), -10, 20)),
    )
    t = dict(
        x=x,
        w=spread_bf16(gen, (H,), -30, 10),
        shift=spread_bf16(gen, (R, H), -140, 30),
        scale=scale,
        idx=torch.randint(0, R, (rows,), generator=gen),
    )
    t = {k: v.to(DEV) for k, v in t.items()}
    with torch.no_grad():
        assert differ(call(cuda_rows, "norm_modulate", t), eager("norm_modulate", t)) == 0


@pytest.mark.parametrize("hidden", [8, 1032, 16384])
def test_norm_modulate_other_widths(hidden):
    """The other register layouts (H <= 2048 and H <= 16384): eager bits and the reference's bits."""
    rows = 33
    gen = torch.Generator().manual_seed(hidden)
    t = dict(
        x=(torch.randn(rows, hidden, generator=gen) * 2).to(BF16),
        w=(0.5 + torch.rand(hidden, generator=gen)).to(BF16),
        shift=(torch.randn(R, hidden, generator=gen) * 0.1).to(BF16),
        scale=(torch.randn(R, hidden, generator=gen) * 0.1).to(BF16),
        idx=torch.randint(0, R, (rows,), generator=gen),
    )
    t = {k: v.to(DEV) for k, v in t.items()}
    g = torch.randn(rows, hidden, generator=gen).to(BF16).to(DEV)
    fn = lambda m: lambda v: m.norm_modulate(v["x"], v["w"], v["shift"], v["scale"], v["idx"], EPS)  # noqa: E731
    out, grads = run(fn(cuda_rows), t, g)
    r_out, r_grads = run(fn(reference_rows), t, g)
    with torch.no_grad():
        eager_out = F.rms_norm(t["x"], (hidden,), t["w"], EPS) * (1.0 + t["scale"][t["idx"]]) + t["shift"][t["idx"]]
    assert same_bits(out, eager_out)
    assert same_bits(out, r_out)
    assert all(same_bits(grads[k], r_grads[k]) for k in grads)


@pytest.mark.parametrize("rows", [1, 64, 257, 4097, 32768])
@pytest.mark.parametrize("hidden", [8, 1032, H, 6144, 6152, 16384])
@pytest.mark.parametrize("variant", [0, 1, 2, 3], ids=["chosen", "fused", "overlapped", "overlapped_ring"])
def test_norm_modulate_backward_kernels_have_the_split_kernels_bits(rows, hidden, variant):
    """norm_modulate_bwd, with its own choice of kernel, the fused one (one pass over grad and x;
    the split kernels past H = 6144) or the overlapped one (partial blocks and dx blocks in one
    launch; its partial blocks' rows through registers or a shared-memory ring), gives dx and every
    tile's partial sums bitwise equal to norm_modulate_bwd_dx's and _partials', twice."""
    gen = torch.Generator().manual_seed(rows + hidden)
    x = (torch.randn(rows, hidden, generator=gen) * 2).to(BF16).to(DEV)
    w = (0.5 + torch.rand(hidden, generator=gen)).to(BF16).to(DEV)
    shift, scale, g = (
        (torch.randn(n, hidden, generator=gen) * s).to(BF16).to(DEV) for n, s in ((R, 0.1), (R, 0.1), (rows, 1))
    )
    idx = packed_index(3, rows).to(DEV)
    ops = torch.ops.rl_kernel_ops
    _, rstd = ops.norm_modulate_fwd(x, w, shift, scale, idx, EPS)
    plan = (*cuda_rows._plan(ops, idx, R), cuda_rows.TILE_ROWS)
    real = int(plan[2][-1])  # tiles in use (the partials' first dimension is an upper bound)
    dx = ops.norm_modulate_bwd_dx(g, x, rstd, w, scale, idx)
    partials = ops.norm_modulate_bwd_partials(g, x, rstd, w, scale, *plan)[:, :real]
    for _ in range(2):
        one_dx, one_partials = ops.norm_modulate_bwd(g, x, rstd, w, scale, idx, *plan, variant)
        assert same_bits(one_dx, dx)
        assert same_bits(one_partials[:, :real], partials)


@pytest.mark.parametrize("rows", [1, 33, 4097, 8192, 8193, 32768, 65536, 65537])
@pytest.mark.parametrize("table_rows", [1, 9, 256, 300])
@pytest.mark.parametrize("keys", ["random", "one", "descending"])
def test_the_plan_is_the_stable_sorts(rows, table_rows, keys):
    """The backward's plan (row_sort_plan's counting sort up to 256 table rows and 65536 positions,
    else torch.sort on keys narrowed to uint8 / int16): the permutation of torch.sort(idx,
    stable=True), its segment starts, and ceil(count / TILE_ROWS) tiles per segment."""
    idx = plan_keys(keys, rows, table_rows)
    assert_stable_sort_plan(idx, table_rows, *cuda_rows._plan(torch.ops.rl_kernel_ops, idx, table_rows))


@pytest.mark.parametrize("rows", [1, 33, 4097, 8192])
@pytest.mark.parametrize("table_rows", [1, 9, 256])
@pytest.mark.parametrize("keys", ["random", "one", "descending"])
def test_the_forward_sorts_the_same_plan(rows, table_rows, keys):
    """norm_modulate_fwd_plan: norm_modulate_fwd's out and rstd, bitwise, and the backward's plan
    (the stable sort's permutation and starts) from the same launch."""
    gen = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, 64, generator=gen).to(BF16).to(DEV)
    w = (0.5 + torch.rand(64, generator=gen)).to(BF16).to(DEV)
    shift, scale = ((torch.randn(table_rows, 64, generator=gen) * 0.1).to(BF16).to(DEV) for _ in range(2))
    idx = plan_keys(keys, rows, table_rows)
    ops = torch.ops.rl_kernel_ops
    out, rstd, perm, seg_start, tile_start = ops.norm_modulate_fwd_plan(
        x, w, shift, scale, idx, EPS, cuda_rows.TILE_ROWS
    )
    expected_out, expected_rstd = ops.norm_modulate_fwd(x, w, shift, scale, idx, EPS)
    assert same_bits(out, expected_out) and same_bits(rstd, expected_rstd)
    tiles = cuda_rows._tile_bound(rows, table_rows)
    assert_stable_sort_plan(idx, table_rows, perm, seg_start, tile_start, tiles)


def plan_keys(keys: str, rows: int, table_rows: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(rows + table_rows)
    return {
        "random": torch.randint(0, table_rows, (rows,), generator=gen),
        "one": torch.full((rows,), table_rows - 1),
        "descending": torch.arange(rows).flip(0) * table_rows // rows,
    }[keys].to(DEV)


def assert_stable_sort_plan(idx, table_rows, perm, seg_start, tile_start, tiles):
    sorted_keys, expected = torch.sort(idx, stable=True)
    counts = torch.bincount(idx, minlength=table_rows)
    tiles_per_segment = (counts + cuda_rows.TILE_ROWS - 1) // cuda_rows.TILE_ROWS
    assert torch.equal(perm, expected)
    assert torch.equal(seg_start.long(), torch.searchsorted(sorted_keys, torch.arange(table_rows + 1, device=DEV)))
    assert tile_start[0] == 0 and torch.equal(tile_start[1:].long(), tiles_per_segment.cumsum(0))
    assert int(tile_start[-1]) <= tiles


@pytest.mark.parametrize("planes", [1, 3])
@pytest.mark.parametrize("table_rows", [1, 9, 40])
@pytest.mark.parametrize("hidden", [8, 1000, H])
def test_the_folds_add_in_the_references_order(planes, table_rows, hidden):
    """row_segment_fold and row_segment_fold_total against reference_rows' fold_tiles and fold_rows,
    with segments of 0 to 40 tiles (every third one empty; more segments than the kernel's lanes)."""
    gen = torch.Generator().manual_seed(planes * 1000 + table_rows * 10 + hidden)
    counts = torch.randint(1, 41, (table_rows,), generator=gen) * (torch.arange(table_rows) % 3 != 1)
    counts[0] = max(int(counts[0]), 1)
    tile_start = torch.cat([counts.new_zeros(1), counts.cumsum(0)]).int().to(DEV)
    segments = torch.repeat_interleave(torch.arange(table_rows), counts).to(DEV)
    partials = (
        torch.randn(planes, int(counts.sum()), hidden, generator=gen)
        * 2.0 ** torch.randint(-20, 20, (planes, int(counts.sum()), 1), generator=gen)
    ).to(DEV)
    ops = torch.ops.rl_kernel_ops
    out, out_bf16 = ops.row_segment_fold(partials, tile_start)
    t_out, t_bf16, total = ops.row_segment_fold_total(partials, tile_start)
    expected = torch.stack([reference_rows.fold_tiles(p, segments, table_rows) for p in partials])
    assert same_bits(out, expected) and same_bits(t_out, expected)
    assert same_bits(out_bf16, expected.to(torch.bfloat16)) and same_bits(t_bf16, out_bf16)
    assert same_bits(total, reference_rows.fold_rows(expected[-1]).to(torch.bfloat16))
    assert same_bits(total, ops.row_segment_fold(out[-1:].contiguous(), None)[1][0, 0])


@pytest.mark.parametrize("rows", [1, 257, 4097, 32768])
def test_gate_residual_row_grads_equal_eager_autograd(rows):
    t = inputs("gate_residual", rows)
    g = grad_out("gate_residual", rows)
    _, ours = run(lambda v: call(cuda_rows, "gate_residual", v), t, g)
    _, theirs = run(lambda v: eager("gate_residual", v), t, g)
    assert same_bits(ours["res"], theirs["res"])
    assert same_bits(ours["y"], theirs["y"])


# ---------------------------------------------------------------- against the reference


@pytest.mark.parametrize("rows", [4097, 32768])
@pytest.mark.parametrize("op", OPS)
def test_reference_on_the_gpu_gives_the_same_bits(op, rows):
    t, g = inputs(op, rows), grad_out(op, rows)
    out, grads = run(lambda v: call(cuda_rows, op, v), t, g)
    r_out, r_grads = run(lambda v: call(reference_rows, op, v), t, g)
    assert same_bits(out, r_out)
    for name in grads:
        assert same_bits(grads[name], r_grads[name]), name


@pytest.mark.parametrize("op", OPS)
def test_cpu_reference_agrees(op):
    rows = 257
    t, g = inputs(op, rows), grad_out(op, rows)
    out, grads = run(lambda v: call(cuda_rows, op, v), t, g)
    cpu = {k: v.cpu() for k, v in t.items()}
    r_out, r_grads = run(lambda v: call(reference_rows, op, v), cpu, g.cpu())
    if op != "norm_modulate":
        assert same_bits(out, r_out)
        assert all(same_bits(grads[k], r_grads[k]) for k in grads)
        return
    # rows whose statistic agrees are bitwise equal; the others differ by CPU vs CUDA rsqrt only
    agree = bits(reference_rows.rms_rstd(cpu["x"], EPS)) == bits(reference_rows.rms_rstd(t["x"], EPS)).cpu()
    print(f"\nCPU vs CUDA rstd agree on {int(agree.sum())}/{rows} rows")
    assert same_bits(out.cpu()[agree], r_out[agree])
    assert same_bits(grads["x"].cpu()[agree], r_grads["x"][agree])
    assert same_bits(grads["shift"], r_grads["shift"])
    torch.testing.assert_close(out.cpu().float(), r_out.float(), rtol=2**-7, atol=2**-6)
    for name in ("x", "w", "scale"):
        torch.testing.assert_close(grads[name].cpu().float(), r_grads[name].float(), rtol=2**-6, atol=2**-6)


# ---------------------------------------------------------------- determinism, batch invariance


@pytest.mark.parametrize("rows", [4097, 32768])
@pytest.mark.parametrize("op", OPS)
def test_deterministic(op, rows):
    t, g = inputs(op, rows), grad_out(op, rows)
    first_out, first = run(lambda v: call(cuda_rows, op, v), t, g)
    for _ in range(2):
        out, grads = run(lambda v: call(cuda_rows, op, v), t, g)
        assert same_bits(out, first_out)
        assert all(same_bits(grads[k], first[k]) for k in first)


def sliced(op: str, t: dict, rows) -> dict:
    return {k: (v[rows] if k in ROW_INPUTS[op] or k == "idx" else v) for k, v in t.items()}


@pytest.mark.parametrize("op", OPS)
def test_batch_invariant(op):
    for seed in (3, 4):
        for n in (64, 257, 2048):
            t, g = inputs(op, n, seed), grad_out(op, n, seed)
            full_out, full = run(lambda v: call(cuda_rows, op, v), t, g)
            bad = 0
            for i in range(n):
                out, grads = run(lambda v: call(cuda_rows, op, v), sliced(op, t, slice(i, i + 1)), g[i : i + 1])
                bad += not same_bits(out, full_out[i : i + 1])
                bad += sum(not same_bits(grads[k], full[k][i : i + 1]) for k in ROW_INPUTS[op])
            assert bad == 0, (seed, n)
    # contiguous sub-batches of a 4096-row batch, and the batch reversed
    n = 4096
    t, g = inputs(op, n, 5), grad_out(op, n, 5)
    full_out, full = run(lambda v: call(cuda_rows, op, v), t, g)
    cuts = [slice(s, s + size) for size in (1, 7, 1024, 2048) for s in range(0, n - size + 1, max(size, 509))]
    reverse = torch.arange(n - 1, -1, -1, device=DEV)
    for rows in cuts + [reverse]:
        out, grads = run(lambda v: call(cuda_rows, op, v), sliced(op, t, rows), g[rows])
        assert same_bits(out, full_out[rows]), rows
        for k in ROW_INPUTS[op]:
            assert same_bits(grads[k], full[k][rows]), (k, rows)


# ---------------------------------------------------------------- accuracy against FP64


def fp64(op: str, t: dict, g: torch.Tensor):
    leaves = {k: v.double().requires_grad_() for k, v in t.items() if v.is_floating_point()}
    idx = t["idx"]
    if op == "norm_modulate":
        x, w, sh, sc = (leaves[k] for k in ("x", "w", "shift", "scale"))
        out = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * w * (1 + sc[idx]) + sh[idx]
    elif op == "gate_residual":
        out = leaves["res"] + leaves["gate"][idx] * leaves["y"]
    else:
        out = leaves["table"][idx]
    grads = torch.autograd.grad(out, list(leaves.values()), g.double())
    return out.detach(), dict(zip(leaves, grads))


def rel_err(a: torch.Tensor, exact: torch.Tensor) -> float:
    return ((a.double() - exact).abs().max() / exact.abs().max()).item()


@pytest.mark.parametrize("op", OPS)
def test_accuracy_at_least_as_good_as_eager(op):
    rows = 4097
    t, g = inputs(op, rows), grad_out(op, rows)
    out, grads = run(lambda v: call(cuda_rows, op, v), t, g)
    e_out, e_grads = run(lambda v: eager(op, v), t, g)
    x_out, x_grads = fp64(op, t, g)
    report = {"out": (rel_err(out, x_out), rel_err(e_out, x_out))}
    report.update({k: (rel_err(grads[k], x_grads[k]), rel_err(e_grads[k], x_grads[k])) for k in x_grads})
    print(
        f"\n{op} max|err|/max|fp64| (rl_kernel, eager): "
        + ", ".join(f"{k} {a:.3e} {b:.3e}" for k, (a, b) in report.items())
    )
    for name, (ours, theirs) in report.items():
        assert ours <= theirs * (1 + 1e-6), name


# ---------------------------------------------------------------- rejection of bad inputs


def test_rejects_bad_inputs_without_breaking_the_device():
    t = inputs("norm_modulate", 8)
    nm = lambda **kw: cuda_rows.norm_modulate(**{**t, **kw}, eps=EPS)  # noqa: E731
    with pytest.raises(TypeError):
        nm(x=t["x"].float())
    with pytest.raises(TypeError):
        nm(idx=t["idx"].int())
    with pytest.raises(ValueError):
        nm(idx=t["idx"].cpu())
    with pytest.raises(ValueError):
        nm(w=t["w"].cpu())
    with pytest.raises(ValueError):
        nm(shift=t["shift"][:, :-8])
    with pytest.raises(ValueError):  # not contiguous
        nm(x=torch.cat([t["x"], t["x"]], 1)[:, ::2])
    base = torch.zeros(8 * H + 1, dtype=BF16, device=DEV)
    with pytest.raises(ValueError):  # 2 bytes past a 16-byte boundary
        nm(x=base[1:].view(8, H))
    with pytest.raises(ValueError):
        nm(idx=torch.full((8,), R, device=DEV))
    with pytest.raises(ValueError):
        nm(idx=torch.full((8,), -1, device=DEV))
    gt = inputs("gate_residual", 8)
    with pytest.raises(ValueError):
        cuda_rows.gate_residual(gt["res"], gt["y"][:4], gt["gate"], gt["idx"])
    with pytest.raises(ValueError):
        cuda_rows.gate_residual(gt["res"], gt["y"], gt["gate"], gt["idx"] + R)
    with pytest.raises(TypeError):
        cuda_rows.adaln_row_gather(gt["gate"].half(), gt["idx"])
    with pytest.raises(ValueError):
        cuda_rows.adaln_row_gather(gt["gate"][:, :12], gt["idx"])
    torch.cuda.synchronize()  # the context is healthy: a valid call still works
    assert same_bits(cuda_rows.adaln_row_gather(gt["gate"], gt["idx"]), gt["gate"][gt["idx"]])


# ---------------------------------------------------------------- no atomics


def test_no_floating_point_atomics_in_the_row_kernels():
    """Every atomic instruction in the row kernels (the plan's sorts included) is an integer add in
    shared memory: the counting sort's counts. No sum goes through an atomic."""
    cuobjdump = shutil.which("cuobjdump")
    if cuobjdump is None:
        pytest.skip("cuobjdump is not installed")
    library = _build.build_directory(torch.cuda.get_device_capability()) / f"{_build.EXTENSION_NAME}.so"
    sass = subprocess.run([cuobjdump, "-sass", str(library)], capture_output=True, text=True, check=True).stdout
    functions = re.split(r"\n\s*Function : ", sass)[1:]
    ours = [
        f
        for f in functions
        if re.search(r"norm_modulate|gate_residual|row_gather|segment_(plan|fold)|sort_", f.split("\n", 1)[0])
    ]
    assert len(ours) >= 10
    atomic = re.compile(r"\b(?:ATOMG|ATOMS|ATOM|RED)\b(?:\.[A-Z0-9_]+)*")
    counts = re.compile(r"ATOMS\.(?:ADD|POPC\.INC)(?:\.(?:32|S32|U32))?")
    found = {(f.split("\n", 1)[0], m) for f in ours for m in atomic.findall(f)}
    assert any("sort_" in name for name, _ in found)  # the scan sees the sort's counts
    offenders = sorted((name, m) for name, m in found if not counts.fullmatch(m))
    assert not offenders, offenders
