"""CUDA GEMM ops of rl_kernel_ops (timestep_mlp, adaln_projection) at the MiniMax-H3 sizes.

Checks, bitwise unless said otherwise: determinism over repeated runs (output and every gradient),
batch invariance (every row of a 2048-row pool computed alone vs inside batches of 64, 257 and 2048,
contiguous sub-batches, the reversed batch), `silu(temb).to(bf16)` equal to eager, agreement with
the CPU reference (exact for the upstream-gradient column sums, to tolerance elsewhere), accuracy
against FP64 no worse than eager cuBLAS with TF32 off (numbers printed), and input rejection.
"""

from __future__ import annotations


import pytest
import torch
import torch.nn.functional as F

import rl_kernel_ops
from audit.core.inputs import seeded_normal
from rl_kernel_ops import reference_gemm

pytestmark = pytest.mark.cuda

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

DEV = torch.device("cuda")
POOL = 2048
TMLP_NAMES = ("x", "w1", "b1", "w2", "b2")
ADALN_NAMES = ("temb", "w", "b")


def device_normal(seed: int, salt: int, shape, dtype, scale: float = 1.0) -> torch.Tensor:
    return seeded_normal(seed, salt, shape, dtype, scale).to(DEV)


@pytest.fixture(scope="module", autouse=True)
def no_tf32():
    prev = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = prev


@pytest.fixture(scope="module")
def tmlp():
    f32 = torch.float32
    params = [
        device_normal(1, 3, (5376, 256), f32, 256**-0.5),
        device_normal(1, 4, (5376,), f32, 0.02),
        device_normal(1, 5, (2688, 5376), f32, 5376**-0.5),
        device_normal(1, 6, (2688,), f32, 0.02),
    ]
    return {
        "fn": rl_kernel_ops.timestep_mlp,
        "x": device_normal(3, 2, (POOL, 256), f32),
        "params": params,
        "g": device_normal(3, 20, (POOL, 2688), f32),
    }


@pytest.fixture(scope="module")
def adaln():
    params = [
        device_normal(1, 8, (96768, 2688), torch.bfloat16, 2688**-0.5),
        device_normal(1, 9, (96768,), torch.bfloat16, 0.02),
    ]
    return {
        "fn": rl_kernel_ops.adaln_projection,
        "x": device_normal(3, 7, (POOL, 2688), torch.float32),
        "params": params,
        "g": device_normal(3, 21, (POOL, 96768), torch.bfloat16),
    }


def run(fn, x, params, g, param_grads: bool):
    """Output and gradients (row input first, then parameters when asked) with upstream grad g."""
    x = x.detach().clone().requires_grad_()
    ps = [p.detach().clone().requires_grad_(param_grads) for p in params]
    out = fn(x, *ps)
    out.backward(g)
    grads = [x.grad] + ([p.grad for p in ps] if param_grads else [])
    return out.detach(), grads


def bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def differing_rows(a: torch.Tensor, b: torch.Tensor) -> int:
    diff = a.view(torch.uint8).reshape(a.shape[0], -1) != b.view(torch.uint8).reshape(b.shape[0], -1)
    return int(diff.any(dim=1).sum())


@pytest.fixture(scope="module")
def case(request, tmlp, adaln):
    return {"timestep_mlp": tmlp, "adaln_projection": adaln}[request.param]


@pytest.mark.parametrize("case", ["timestep_mlp", "adaln_projection"], indirect=True)
def test_deterministic_over_repeats(case):
    fn = case["fn"]
    first = run(fn, case["x"], case["params"], case["g"], param_grads=True)
    for _ in range(2):
        again = run(fn, case["x"], case["params"], case["g"], param_grads=True)
        assert bits_equal(first[0], again[0])
        for a, b in zip(first[1], again[1]):
            assert bits_equal(a, b)


@pytest.mark.parametrize("case", ["timestep_mlp", "adaln_projection"], indirect=True)
def test_batch_invariance(case):
    fn = case["fn"]
    x, params, g = case["x"], case["params"], case["g"]
    alone_out, alone_dx = [], []
    for i in range(POOL):
        o, (dx,) = run(fn, x[i : i + 1], params, g[i : i + 1], param_grads=False)
        alone_out.append(o)
        alone_dx.append(dx)
    alone_out, alone_dx = torch.cat(alone_out), torch.cat(alone_dx)
    batches = {f"first {n}": slice(0, n) for n in (64, 257, POOL)}
    batches.update(
        {"rows 300:557": slice(300, 557), "rows 1000:1064": slice(1000, 1064), "rows 2047:2048": slice(2047, 2048)}
    )
    report = {}
    for name, sl in batches.items():
        o, (dx,) = run(fn, x[sl], params, g[sl], param_grads=False)
        report[name] = (differing_rows(o, alone_out[sl]), differing_rows(dx, alone_dx[sl]))
    o, (dx,) = run(fn, x.flip(0), params, g.flip(0), param_grads=False)
    report["reversed 2048"] = (differing_rows(o.flip(0), alone_out), differing_rows(dx.flip(0), alone_dx))
    print(f"\nbatch invariance (rows differing: out, row grad): {report}")
    assert all(v == (0, 0) for v in report.values()), report


def test_adaln_silu_cast_bitwise_equal_to_eager(adaln):
    temb = adaln["x"]
    w, b = adaln["params"]
    rl_kernel_ops.adaln_projection(temb[:1], w, b)  # builds and loads the extension
    _, a = torch.ops.rl_kernel_ops.adaln_proj_forward(temb, w, b)
    assert bits_equal(a, F.silu(temb).to(torch.bfloat16))


@pytest.mark.parametrize("rows", [1, 257, 2048])
def test_adaln_dgrad_in_two_halves_gives_the_backwards_d_temb(adaln, rows):
    """The sharded path's halves: the chunk partials, computed whole or chunk by chunk on the
    chunk's rows alone (as a rank holding them does), folded by adaln_fold_dgrad, are bitwise the
    backward's d_temb."""
    from rl_kernel_ops import cuda_gemm
    from rl_kernel_ops.reference_gemm import ADALN_SPLITS_DGRAD

    temb = adaln["x"][:rows].detach().requires_grad_()
    w, b = adaln["params"]
    g = device_normal(5, 21, (rows, w.shape[0]), torch.bfloat16)
    (dtemb,) = torch.autograd.grad(rl_kernel_ops.adaln_projection(temb, w, b), [temb], g)
    whole = cuda_gemm.adaln_dgrad_partials(g, w, ADALN_SPLITS_DGRAD)
    chunk = w.shape[0] // ADALN_SPLITS_DGRAD
    alone = [
        cuda_gemm.adaln_dgrad_partials(g[:, k : k + chunk], w[k : k + chunk], 1) for k in range(0, w.shape[0], chunk)
    ]
    assert bits_equal(torch.cat(alone), whole)
    assert bits_equal(cuda_gemm.adaln_fold_dgrad(whole, temb.detach()), dtemb)


@pytest.mark.parametrize("rows", [1, 3, 8, 257])
def test_adaln_forward_without_autograd_gives_the_autograd_forwards_bits(adaln, rows):
    """A forward that cannot be asked for a gradient (no_grad, or no input requiring one) skips the
    autograd Function: the same bits as the forward autograd records, and no graph."""
    temb = adaln["x"][:rows]
    w, b = adaln["params"]
    recorded = rl_kernel_ops.adaln_projection(temb.detach().requires_grad_(), w, b)
    assert recorded.grad_fn is not None
    with torch.no_grad():
        plain = rl_kernel_ops.adaln_projection(temb.detach().requires_grad_(), w, b)
    leaves = rl_kernel_ops.adaln_projection(temb, w, b)
    assert plain.grad_fn is None and leaves.grad_fn is None
    assert bits_equal(plain, recorded.detach()) and bits_equal(leaves, recorded.detach())


@pytest.mark.skipif(torch.cuda.get_device_capability() != (9, 0), reason="the wgmma forward is sm_90 only")
@pytest.mark.parametrize("variant", [0, 1, 2, 3])
@pytest.mark.parametrize("rows", [1, 63, 64, 65, 257, 2048])
def test_adaln_wgmma_forward_bitwise_equal_to_mma(adaln, rows, variant):
    """Every wgmma kernel (0: chosen by T; 1: a CTA per tile; 2: persistent; 3: persistent with
    2-CTA clusters) chains 16-wide k steps in ascending order from 0, as the mma.sync kernel does:
    the same bits. Whether eager cuBLAS gives them too is printed, not asserted (its choice)."""
    temb = adaln["x"][:rows]
    w, b = adaln["params"]
    rl_kernel_ops.adaln_projection(temb[:1], w, b)  # builds and loads the extension
    out_w, a_w = torch.ops.rl_kernel_ops.adaln_proj_forward_wgmma(temb, w, b, variant)
    out_m, a_m = torch.ops.rl_kernel_ops.adaln_proj_forward(temb, w, b)
    print(f"\nT={rows} variant {variant}: equal to eager cuBLAS: {bits_equal(out_w, _eager_adaln(temb, w, b))}")
    assert bits_equal(a_w, a_m)
    assert bits_equal(out_w, out_m)


@pytest.mark.skipif(torch.cuda.get_device_capability() != (9, 0), reason="the wgmma forward is sm_90 only")
@pytest.mark.parametrize("rows", [1, 2, 3, 5, 8])
def test_adaln_wgmma_stream_forward_bitwise_equal_to_mma(adaln, rows):
    """The W-streaming kernel (variant 4, the default for 1..8 rows: W's rows as wgmma's M, the
    rows of a as its n = 8, silu computed inside the kernel) gives the mma.sync kernels' out and a
    bit for bit; every row of the 8-row batch equals that row computed alone."""
    temb = adaln["x"][:rows]
    w, b = adaln["params"]
    ops = torch.ops.rl_kernel_ops
    rl_kernel_ops.adaln_projection(temb[:1], w, b)  # builds and loads the extension
    out_s, a_s = ops.adaln_proj_forward_wgmma(temb, w, b, 4)
    out_m, a_m = ops.adaln_proj_forward(temb, w, b)
    assert bits_equal(a_s, a_m)
    assert bits_equal(out_s, out_m)
    batch = ops.adaln_proj_forward_wgmma(adaln["x"][:8], w, b, 4)[0]
    assert bits_equal(out_s, batch[:rows])


@pytest.mark.skipif(torch.cuda.get_device_capability() != (9, 0), reason="the wgmma forward is sm_90 only")
def test_adaln_wgmma_stream_forward_refuses_9_rows(adaln):
    w, b = adaln["params"]
    rl_kernel_ops.adaln_projection(adaln["x"][:1], w, b)
    with pytest.raises(RuntimeError, match="variant 4"):
        torch.ops.rl_kernel_ops.adaln_proj_forward_wgmma(adaln["x"][:9], w, b, 4)


def _adaln_backward(kind: str, rows: int, adaln, variant: int = 0, needs=(True, True, True)):
    """[d_temb, dw, db] of the raw backward op, "mma" (mma.sync) or "wgmma" (with ``variant``),
    for the first ``rows`` rows of the pool; `a` from the forward op."""
    temb, g = adaln["x"][:rows], adaln["g"][:rows]
    w, b = adaln["params"]
    rl_kernel_ops.adaln_projection(temb[:1], w, b)  # builds and loads the extension
    ops = torch.ops.rl_kernel_ops
    _, a = ops.adaln_proj_forward(temb, w, b)
    args = (g.contiguous(), temb, a, w, reference_gemm.ADALN_SPLITS_DGRAD, reference_gemm.ROW_CHUNK, *needs)
    if kind == "wgmma":
        return ops.adaln_proj_backward_wgmma(*args, variant)
    return ops.adaln_proj_backward(*args)


@pytest.mark.skipif(torch.cuda.get_device_capability() != (9, 0), reason="the wgmma backward is sm_90 only")
@pytest.mark.parametrize("variant", [0, 1, 2, 3])
@pytest.mark.parametrize("rows", [1, 63, 64, 65, 257, 2048])
def test_adaln_wgmma_backward_bitwise_equal_to_mma(adaln, rows, variant):
    """The wgmma backward keeps the mma.sync backward's order: dgrad in
    ADALN_SPLITS_DGRAD chunks of N, each one chain of 16-wide k steps from 0, folded in ascending
    order; wgrad one chain over all T rows; db the same column-sum kernel. Every dgrad tile
    (variant 0: chosen by T; 1..3 forced) gives the same bits as mma.sync, for all three grads."""
    old = _adaln_backward("mma", rows, adaln)
    new = _adaln_backward("wgmma", rows, adaln, variant)
    for name, x, y in zip(("d_temb", "dw", "db"), new, old):
        assert bits_equal(x, y), (name, rows, variant)


@pytest.mark.skipif(torch.cuda.get_device_capability() != (9, 0), reason="the wgmma backward is sm_90 only")
def test_adaln_wgmma_backward_rows_batch_invariant_and_repeatable(adaln):
    """d_temb rows of the wgmma backward computed alone and in sub-batches (other dgrad tiles)
    equal the same rows of the 2048-row batch; the whole backward repeats bit for bit."""
    full = _adaln_backward("wgmma", POOL, adaln)
    again = _adaln_backward("wgmma", POOL, adaln)
    for x, y in zip(full, again):
        assert bits_equal(x, y)
    d_full = full[0]
    temb, g = adaln["x"], adaln["g"]
    w, b = adaln["params"]
    ops = torch.ops.rl_kernel_ops
    _, a = ops.adaln_proj_forward(temb, w, b)
    splits, rc = reference_gemm.ADALN_SPLITS_DGRAD, reference_gemm.ROW_CHUNK

    def d_temb(sl):
        return ops.adaln_proj_backward_wgmma(
            g[sl].contiguous(), temb[sl], a[sl].contiguous(), w, splits, rc, True, False, False, 0
        )[0]

    report = {}
    for i in (0, 1, 63, 64, 65, 1000, 2047):
        report[f"row {i}"] = differing_rows(d_temb(slice(i, i + 1)), d_full[i : i + 1])
    for lo, hi in ((0, 64), (5, 69), (300, 557), (1000, 1129), (7, 2048)):
        report[f"rows {lo}:{hi}"] = differing_rows(d_temb(slice(lo, hi)), d_full[lo:hi])
    print(f"\nwgmma backward d_temb rows differing from the 2048-row batch: {report}")
    assert all(v == 0 for v in report.values()), report


@pytest.mark.skipif(torch.cuda.get_device_capability() != (9, 0), reason="the wgmma backward is sm_90 only")
def test_adaln_wgmma_backward_runs_on_a_fresh_thread(adaln):
    """autograd runs backward on a worker thread whose first CUDA call may be ours: the wgmma
    backward encodes its TMA maps with a driver call that needs a current context there (it
    crashed the process before encode_fn made the context current). Called as a fresh thread's
    first CUDA work, it gives the main thread's bits."""
    import threading

    expected = _adaln_backward("wgmma", 64, adaln)
    temb, g = adaln["x"][:64], adaln["g"][:64]
    w, b = adaln["params"]
    ops = torch.ops.rl_kernel_ops
    args = (
        g.contiguous(),
        temb,
        ops.adaln_proj_forward(temb, w, b)[1],
        w,
        reference_gemm.ADALN_SPLITS_DGRAD,
        reference_gemm.ROW_CHUNK,
        True,
        True,
        True,
        0,
    )
    torch.cuda.synchronize()
    got: list = []
    worker = threading.Thread(target=lambda: got.append(ops.adaln_proj_backward_wgmma(*args)))
    worker.start()
    worker.join()
    assert got, "the backward raised on the worker thread"
    for x, y in zip(got[0], expected):
        assert bits_equal(x, y)


def _rel(a: torch.Tensor, ref: torch.Tensor) -> float:
    return float((a.double() - ref).abs().max() / ref.abs().max())


@pytest.mark.parametrize("rows", [16])
def test_timestep_mlp_matches_cpu_reference(tmlp, rows):
    x, g = tmlp["x"][:rows], tmlp["g"][:rows]
    cuda_out, cuda_grads = run(rl_kernel_ops.timestep_mlp, x, tmlp["params"], g, param_grads=True)
    cpu_out, cpu_grads = run(
        reference_gemm.timestep_mlp, x.cpu(), [p.cpu() for p in tmlp["params"]], g.cpu(), param_grads=True
    )
    assert _rel(cuda_out.cpu(), cpu_out.double()) < 1e-5
    for name, a, b in zip(TMLP_NAMES, cuda_grads, cpu_grads):
        assert _rel(a.cpu(), b.double()) < 1e-5, name
    assert bits_equal(cuda_grads[4].cpu(), cpu_grads[4])  # db2: same column sum of the same dout


def test_adaln_projection_matches_cpu_reference(adaln):
    rows = 3
    x, g = adaln["x"][:rows], adaln["g"][:rows]
    cuda_out, cuda_grads = run(rl_kernel_ops.adaln_projection, x, adaln["params"], g, param_grads=True)
    cpu_out, cpu_grads = run(
        reference_gemm.adaln_projection, x.cpu(), [p.cpu() for p in adaln["params"]], g.cpu(), param_grads=True
    )
    out_diff = (cuda_out.cpu().float() - cpu_out.float()).abs()
    # BF16 outputs: at most one BF16 rounding step apart, almost all identical.
    assert float(out_diff.max()) <= 2.0**-7 * float(cpu_out.float().abs().max())
    assert float((out_diff > 0).float().mean()) < 0.01
    assert _rel(cuda_grads[0].cpu(), cpu_grads[0].double()) < 1e-2  # d_temb: BF16-rounded d_a inside
    assert _rel(cuda_grads[1].cpu(), cpu_grads[1].double()) < 1e-2
    assert bits_equal(cuda_grads[2].cpu(), cpu_grads[2])  # db: same column sum of the same dout


def _fp64_tmlp(x, params, g):
    x64 = x.double().requires_grad_()
    ps = [p.double().requires_grad_() for p in params]
    out = F.linear(F.silu(F.linear(x64, ps[0], ps[1])), ps[2], ps[3])
    out.backward(g.double())
    return out.detach(), [x64.grad] + [p.grad for p in ps]


def _fp64_adaln(temb, params, g):
    w, b = (p.double() for p in params)
    a = F.silu(temb).to(torch.bfloat16).double()  # the op's exact BF16 input, then all in FP64
    g64, t64 = g.double(), temb.double()
    out = a @ w.t() + b
    sig = torch.sigmoid(t64)
    dtemb = (g64 @ w) * sig * (1 + t64 * (1 - sig))
    return out, [dtemb, g64.t() @ a, g64.sum(0)]


def _eager_tmlp(x, w1, b1, w2, b2):
    return F.linear(F.silu(F.linear(x, w1, b1)), w2, b2)


def _eager_adaln(temb, w, b):
    return F.linear(F.silu(temb).to(torch.bfloat16), w, b)


@pytest.mark.parametrize("op", ["timestep_mlp", "adaln_projection"])
def test_accuracy_vs_fp64_not_worse_than_cublas(op, tmlp, adaln):
    case, names, eager, fp64 = {
        "timestep_mlp": (tmlp, TMLP_NAMES, _eager_tmlp, _fp64_tmlp),
        "adaln_projection": (adaln, ADALN_NAMES, _eager_adaln, _fp64_adaln),
    }[op]
    x, params, g = case["x"], case["params"], case["g"]
    ref_out, ref_grads = fp64(x, params, g)
    ours = run(case["fn"], x, params, g, param_grads=True)
    theirs = run(eager, x, params, g, param_grads=True)
    rows = [("out", _rel(ours[0], ref_out), _rel(theirs[0], ref_out))]
    rows += [(n, _rel(a, r), _rel(b, r)) for n, a, b, r in zip(names, ours[1], theirs[1], ref_grads)]
    print(f"\n{op} T={POOL} max|err|/max|ref| vs FP64 (rl_kernel, eager cuBLAS TF32 off):")
    for name, mine, cublas in rows:
        print(f"  {name:5s} rl_kernel {mine:.3e}  cublas {cublas:.3e}  ratio {mine / cublas:.3f}")
    for name, mine, cublas in rows:
        assert mine <= 1.05 * cublas, (name, mine, cublas)


def test_input_rejection(tmlp, adaln):
    x = tmlp["x"][:4]
    w1, b1, w2, b2 = tmlp["params"]
    with pytest.raises(TypeError):
        rl_kernel_ops.timestep_mlp(x.double(), w1, b1, w2, b2)
    with pytest.raises(ValueError):
        rl_kernel_ops.timestep_mlp(x[:, :128], w1, b1, w2, b2)  # shape (and stride) mismatch
    with pytest.raises(ValueError):
        rl_kernel_ops.timestep_mlp(x, w1.cpu(), b1, w2, b2)  # device
    with pytest.raises(ValueError):
        rl_kernel_ops.timestep_mlp(x.t().contiguous().t(), w1, b1, w2, b2)  # non-contiguous
    shifted = torch.empty(x.numel() + 1, device=DEV)[1:].view_as(x).copy_(x)
    with pytest.raises(ValueError):
        rl_kernel_ops.timestep_mlp(shifted, w1, b1, w2, b2)  # 4-byte offset: misaligned
    with pytest.raises(ValueError):
        rl_kernel_ops.timestep_mlp(x[:0], w1, b1, w2, b2)  # no rows
    with pytest.raises(ValueError):
        rl_kernel_ops.timestep_mlp(x, w1[:100], b1[:100], w2[:, :100].contiguous(), b2)  # 100 % 128
    temb = adaln["x"][:2]
    w, b = adaln["params"]
    with pytest.raises(TypeError):
        rl_kernel_ops.adaln_projection(temb, w.float(), b)
    with pytest.raises(TypeError):
        rl_kernel_ops.adaln_projection(temb.bfloat16(), w, b)
    with pytest.raises(ValueError):
        rl_kernel_ops.adaln_projection(temb, w[:, :2560], b)  # non-contiguous weight
    with pytest.raises(ValueError):
        rl_kernel_ops.adaln_projection(temb, w, b[:-1])
    with pytest.raises(ValueError):
        rl_kernel_ops.adaln_projection(temb, w[:1000], b[:1000])  # 1000 % 128
    shifted = torch.empty(temb.numel() + 1, device=DEV)[1:].view_as(temb).copy_(temb)
    with pytest.raises(ValueError):
        rl_kernel_ops.adaln_projection(shifted, w, b)
