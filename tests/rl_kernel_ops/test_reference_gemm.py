"""CPU reference of the GEMM ops (rl_kernel_ops.reference_gemm): determinism, batch invariance,
agreement with eager autograd to tolerance, the column-sum order, and argument validation."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from audit.core.inputs import seeded_normal
from rl_kernel_ops import reference_gemm as ref


def normal(seed: int, salt: int, shape, dtype=torch.float32, scale: float = 1.0) -> torch.Tensor:
    return seeded_normal(seed, salt, shape, dtype, scale)


def tmlp_params(f: int, hd: int, d: int) -> list[torch.Tensor]:
    return [
        normal(1, 3, (hd, f), scale=f**-0.5),
        normal(1, 4, (hd,), scale=0.02),
        normal(1, 5, (d, hd), scale=hd**-0.5),
        normal(1, 6, (d,), scale=0.02),
    ]


def adaln_params(d: int, n: int) -> list[torch.Tensor]:
    return [normal(1, 8, (n, d), torch.bfloat16, d**-0.5), normal(1, 9, (n,), torch.bfloat16, 0.02)]


def run(fn, x, params, g, param_grads: bool = True):
    x = x.detach().clone().requires_grad_()
    ps = [p.detach().clone().requires_grad_(param_grads) for p in params]
    out = fn(x, *ps)
    out.backward(g)
    return out.detach(), [x.grad] + ([p.grad for p in ps] if param_grads else [])


def bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def rel(a: torch.Tensor, ref64: torch.Tensor) -> float:
    return float((a.double() - ref64).abs().max() / ref64.abs().max())


# Odd widths on purpose: vector loops meet their scalar tails, which must not break invariance.
SMALL_TMLP = dict(f=64, hd=260, d=132)
SMALL_ADALN = dict(d=72, n=200)


def small_tmlp_case(rows: int):
    return normal(3, 2, (rows, SMALL_TMLP["f"])), tmlp_params(**SMALL_TMLP), normal(3, 20, (rows, SMALL_TMLP["d"]))


def small_adaln_case(rows: int):
    return (
        normal(3, 7, (rows, SMALL_ADALN["d"])),
        adaln_params(**SMALL_ADALN),
        normal(3, 21, (rows, SMALL_ADALN["n"]), torch.bfloat16),
    )


def test_timestep_mlp_matches_eager_fp64():
    x, params, g = small_tmlp_case(5)
    out, grads = run(ref.timestep_mlp, x, params, g)
    x64 = x.double().requires_grad_()
    p64 = [p.double().requires_grad_() for p in params]
    out64 = F.linear(F.silu(F.linear(x64, p64[0], p64[1])), p64[2], p64[3])
    out64.backward(g.double())
    assert rel(out, out64.detach()) < 1e-5
    for a, b in zip(grads, [x64.grad] + [p.grad for p in p64]):
        assert rel(a, b) < 1e-5


def test_adaln_projection_matches_eager_autograd():
    temb, params, g = small_adaln_case(5)
    out, grads = run(ref.adaln_projection, temb, params, g)
    eager_out, eager_grads = run(lambda t, w, b: F.linear(F.silu(t).to(torch.bfloat16), w, b), temb, params, g)
    assert out.dtype == torch.bfloat16 and grads[0].dtype == torch.float32
    assert grads[1].dtype == torch.bfloat16 and grads[2].dtype == torch.bfloat16
    # One BF16 rounding of nearly equal FP32 sums: at most one BF16 step apart.
    assert float((out.float() - eager_out.float()).abs().max()) <= 2.0**-7 * float(eager_out.float().abs().max())
    for a, b in zip(grads, eager_grads):
        assert rel(a, b.double()) < 1e-2


def test_real_sizes_agree_with_fp64():
    """The MiniMax-H3 sizes run on the CPU in seconds and agree with FP64 eager."""
    x, g = normal(3, 2, (2, 256)), normal(3, 20, (2, 2688))
    params = tmlp_params(256, 5376, 2688)
    out, grads = run(ref.timestep_mlp, x, params, g)
    x64 = x.double().requires_grad_()
    p64 = [p.double().requires_grad_() for p in params]
    F.linear(F.silu(F.linear(x64, p64[0], p64[1])), p64[2], p64[3]).backward(g.double())
    for a, b in zip(grads, [x64.grad] + [p.grad for p in p64]):
        assert rel(a, b) < 1e-5

    temb, g = normal(3, 7, (2, 2688)), normal(3, 21, (2, 96768), torch.bfloat16)
    out, grads = run(ref.adaln_projection, temb, adaln_params(2688, 96768), g, param_grads=False)
    assert out.shape == (2, 96768) and grads[0].shape == (2, 2688)
    assert torch.isfinite(out.float()).all() and torch.isfinite(grads[0]).all()


@pytest.mark.parametrize("op", ["timestep_mlp", "adaln_projection"])
def test_deterministic(op):
    fn, case = (ref.timestep_mlp, small_tmlp_case) if op == "timestep_mlp" else (ref.adaln_projection, small_adaln_case)
    x, params, g = case(9)
    first = run(fn, x, params, g)
    again = run(fn, x, params, g)
    assert bits_equal(first[0], again[0])
    for a, b in zip(first[1], again[1]):
        assert bits_equal(a, b)


@pytest.mark.parametrize("op", ["timestep_mlp", "adaln_projection"])
def test_batch_invariant(op):
    fn, case = (ref.timestep_mlp, small_tmlp_case) if op == "timestep_mlp" else (ref.adaln_projection, small_adaln_case)
    x, params, g = case(11)
    full_out, (full_dx,) = run(fn, x, params, g, param_grads=False)
    for i in range(x.shape[0]):
        out, (dx,) = run(fn, x[i : i + 1], params, g[i : i + 1], param_grads=False)
        assert bits_equal(out, full_out[i : i + 1]) and bits_equal(dx, full_dx[i : i + 1]), i
    out, (dx,) = run(fn, x[3:8], params, g[3:8], param_grads=False)
    assert bits_equal(out, full_out[3:8]) and bits_equal(dx, full_dx[3:8])
    out, (dx,) = run(fn, x.flip(0), params, g.flip(0), param_grads=False)
    assert bits_equal(out.flip(0), full_out) and bits_equal(dx.flip(0), full_dx)


def test_bias_gradients_are_chunked_column_sums_folded_pairwise():
    rows = 4 * ref.ROW_CHUNK + 3  # four full chunks and a partial one
    x, params, g = small_tmlp_case(rows)
    _, grads = run(ref.timestep_mlp, x, params, g)
    parts = []
    for r0 in range(0, rows, ref.ROW_CHUNK):
        part = torch.zeros(g.shape[1])
        for row in g[r0 : r0 + ref.ROW_CHUNK]:
            part = part + row
        parts.append(part)
    p0, p1, p2, p3, p4 = parts
    assert bits_equal(grads[4], ((p0 + p1) + (p2 + p3)) + p4)


def test_weight_gradients_fold_fixed_row_chunks():
    g, a = normal(6, 1, (ref.TMLP_WGRAD_ROWS + 3, 5)), normal(6, 2, (ref.TMLP_WGRAD_ROWS + 3, 4))
    chunks = []
    for r0 in (0, ref.TMLP_WGRAD_ROWS):
        acc = torch.zeros(5, 4)
        for t in range(r0, min(g.shape[0], r0 + ref.TMLP_WGRAD_ROWS)):
            acc = acc + g[t].unsqueeze(1) * a[t]
        chunks.append(acc)
    assert bits_equal(ref.rows_outer_sum(g, a, ref.TMLP_WGRAD_ROWS), chunks[0] + chunks[1])


def test_split_k_order_is_chunked_running_sums():
    a, b = normal(5, 1, (3, 8)), normal(5, 2, (8, 4))
    got = ref.split_k_matmul(a, b, 2)
    halves = []
    for ks in (range(0, 4), range(4, 8)):
        part = torch.zeros(3, 4)
        for k in ks:
            part = part + a[:, k : k + 1] * b[k]
        halves.append(part)
    assert bits_equal(got, halves[0] + halves[1])


def test_timestep_mlp_rejects_bad_arguments():
    x, params, _ = small_tmlp_case(2)
    w1, b1, w2, b2 = params
    with pytest.raises(TypeError):
        ref.timestep_mlp(x.double(), w1, b1, w2, b2)
    with pytest.raises(TypeError):
        ref.timestep_mlp(x.numpy(), w1, b1, w2, b2)
    with pytest.raises(ValueError):
        ref.timestep_mlp(x[0], w1, b1, w2, b2)
    with pytest.raises(ValueError):
        ref.timestep_mlp(x[:, :10], w1, b1, w2, b2)
    with pytest.raises(ValueError):
        ref.timestep_mlp(x, w1, b1[:-1], w2, b2)
    with pytest.raises(ValueError):
        ref.timestep_mlp(x[:0], w1, b1, w2, b2)
    with pytest.raises(ValueError):
        ref.timestep_mlp(x, w1, b1, w2, b2[:-1])


def test_adaln_projection_rejects_bad_arguments():
    temb, (w, b), _ = small_adaln_case(2)
    with pytest.raises(TypeError):
        ref.adaln_projection(temb.bfloat16(), w, b)
    with pytest.raises(TypeError):
        ref.adaln_projection(temb, w.float(), b)
    with pytest.raises(TypeError):
        ref.adaln_projection(temb, w, b.float())
    with pytest.raises(ValueError):
        ref.adaln_projection(temb, w[:, :-1], b)
    with pytest.raises(ValueError):
        ref.adaln_projection(temb, w[:-1], b[:-1])  # N not a multiple of the split count
    with pytest.raises(ValueError):
        ref.adaln_projection(temb[:0], w, b)
