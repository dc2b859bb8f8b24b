"""PyTorch implementation of the GEMM ops' algorithm: the ``rl_kernel`` candidate on the CPU and the
oracle the CUDA kernels (``csrc/timestep_mlp.cu``, ``csrc/adaln_projection.cu``) are tested against.

The canonical order (shared with the CUDA kernels; the split counts below are the one definition,
``cuda_gemm`` passes them to the kernels):
- an output element of a GEMM over K is built from ``splits`` equal chunks of K; each chunk is a
  running sum over its k in ascending order, started from 0; the chunk sums are folded in ascending
  chunk order (``p0 + p1 + ...``); then the epilogue (bias add, activation, rounding) is applied.
  The split count is a constant of the op, never a function of the row count T.
- weight gradients (a reduction over the T rows): timestep_mlp cuts the rows into chunks of
  ``TMLP_WGRAD_ROWS`` (each a running sum in ascending row order, the chunk sums folded in
  ascending order); adaln_projection runs over all rows in ascending order (its BF16 rounding
  dominates the error);
- bias gradients are column sums over fixed chunks of ``ROW_CHUNK`` rows, each summed in ascending
  order from 0, the chunk sums folded pairwise (``pairwise_fold``), in FP32, cast once.

Here every running-sum step is a separate FP32 multiply and add (the CUDA kernels fuse them: FFMA
for FP32, MMA for BF16); elementwise torch ops are applied with the same shape for every row, so a
row's results never depend on the rest of the batch. Hence, on any one device:
- deterministic: the same inputs give the same bits, output and every gradient;
- batch-invariant: a row's output and its row gradient (dx / d_temb) are the same bits whatever
  the batch around it;
- parameter gradients are repeatable for the same batch.

Against the CUDA kernels:
- exactly equal: the bias gradients ``db2`` (timestep_mlp) and ``db`` (adaln_projection), which
  are column sums of the upstream gradient in the same order and arithmetic on both sides;
  ``a = silu(temb).to(bf16)`` in adaln_projection agrees except where CPU and CUDA ``exp`` differ
  in the last bit *and* that moves the BF16 rounding (rare);
- equal to tolerance only: every GEMM result (a fused multiply-add, and the tensor core's internal
  accumulation, round differently from a separate multiply and add), and whatever depends on it
  (outputs, dx, d_temb, weight gradients, db1).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from ._checks import require_tensor

# Split-K counts of the canonical order (see the module docstring).
TMLP_SPLITS_FC1 = 1  # h = x @ w1^T, K = 256
TMLP_SPLITS_FC2 = 4  # out = a @ w2^T, K = 5376
TMLP_SPLITS_FC2_DGRAD = 2  # d_a = dout @ w2, K = 2688
TMLP_SPLITS_FC1_DGRAD = 4  # dx = dh @ w1, K = 5376
ADALN_SPLITS_DGRAD = 4  # d_a = dout @ w, K = 96768
TMLP_WGRAD_ROWS = 256  # rows per chunk of timestep_mlp's weight gradients
ROW_CHUNK = 16  # rows per chunk of the bias-gradient column sums

_BLOCK_ELEMS = 1 << 23  # weights are converted to FP32 in blocks of about this many values


# --------------------------------------------------------------------------------------------
# Argument checks shared with cuda_gemm.


def _require_same_device(**tensors: torch.Tensor) -> None:
    devices = {name: t.device for name, t in tensors.items()}
    if len(set(devices.values())) > 1:
        raise ValueError(f"all tensors must be on one device, got {devices}")


def check_timestep_mlp_args(x, w1, b1, w2, b2) -> None:
    """x (T, F), w1 (Hd, F), b1 (Hd,), w2 (D, Hd), b2 (D,), all float32, T >= 1."""
    for name, t, dim in (("x", x, 2), ("w1", w1, 2), ("b1", b1, 1), ("w2", w2, 2), ("b2", b2, 1)):
        require_tensor(name, t, torch.float32, dim)
    if x.shape[0] < 1:
        raise ValueError("timestep_mlp needs at least one row")
    hd, f = w1.shape
    d = w2.shape[0]
    if x.shape[1] != f or b1.shape[0] != hd or w2.shape[1] != hd or b2.shape[0] != d:
        raise ValueError(
            "timestep_mlp shapes do not chain: "
            f"x {tuple(x.shape)}, w1 {tuple(w1.shape)}, b1 {tuple(b1.shape)}, "
            f"w2 {tuple(w2.shape)}, b2 {tuple(b2.shape)}"
        )
    for name, k, splits in (("F", f, TMLP_SPLITS_FC1), ("Hd", hd, TMLP_SPLITS_FC2), ("D", d, TMLP_SPLITS_FC2_DGRAD)):
        if k % splits:
            raise ValueError(f"timestep_mlp: {name}={k} is not a multiple of its split count {splits}")
    _require_same_device(x=x, w1=w1, b1=b1, w2=w2, b2=b2)


def check_adaln_projection_args(temb, w, b) -> None:
    """temb (T, D) float32, w (N, D) bfloat16, b (N,) bfloat16, T >= 1."""
    require_tensor("temb", temb, torch.float32, 2)
    require_tensor("w", w, torch.bfloat16, 2)
    require_tensor("b", b, torch.bfloat16, 1)
    if temb.shape[0] < 1:
        raise ValueError("adaln_projection needs at least one row")
    if w.shape[1] != temb.shape[1] or b.shape[0] != w.shape[0]:
        raise ValueError(
            f"adaln_projection shapes do not chain: temb {tuple(temb.shape)}, w {tuple(w.shape)}, b {tuple(b.shape)}"
        )
    if w.shape[0] % ADALN_SPLITS_DGRAD:
        raise ValueError(f"adaln_projection: N={w.shape[0]} is not a multiple of {ADALN_SPLITS_DGRAD}")
    _require_same_device(temb=temb, w=w, b=b)


# --------------------------------------------------------------------------------------------
# The canonical reductions, in FP32 with separate multiply and add.


def split_k_matmul(a: torch.Tensor, b_kn: torch.Tensor, splits: int) -> torch.Tensor:
    """(M, K) @ (K, N) -> (M, N) FP32 in the canonical split-K order; b_kn may be any dtype/view."""
    m, k = a.shape
    n = b_kn.shape[1]
    a = a.float()
    kc = k // splits
    k_block = max(1, min(kc, _BLOCK_ELEMS // max(n, 1)))  # rows of b converted to FP32 at a time
    total = None
    for s in range(splits):
        part = torch.zeros(m, n, dtype=torch.float32, device=a.device)
        for k0 in range(s * kc, (s + 1) * kc, k_block):
            blk = b_kn[k0 : min(k0 + k_block, (s + 1) * kc)].float().contiguous()
            for j in range(blk.shape[0]):
                part.add_(a[:, k0 + j : k0 + j + 1] * blk[j])
        total = part if total is None else total.add_(part)
    return total


def rows_outer_sum(g: torch.Tensor, a: torch.Tensor, chunk_rows: int | None = None) -> torch.Tensor:
    """g^T @ a for g (T, M), a (T, N) in FP32 (weight grads): running sums over chunks of
    ``chunk_rows`` rows (all rows when None) in ascending row order, chunk sums folded in order."""
    t_rows, m = g.shape
    n = a.shape[1]
    g = g.float()
    a = a.float()
    step = chunk_rows or t_rows
    m_block = max(1, min(m, _BLOCK_ELEMS // max(n, 1)))
    out = torch.empty(m, n, dtype=torch.float32, device=g.device)
    for m0 in range(0, m, m_block):
        gb = g[:, m0 : m0 + m_block]
        total = None
        for r0 in range(0, t_rows, step):
            acc = torch.zeros(gb.shape[1], n, dtype=torch.float32, device=g.device)
            for t in range(r0, min(t_rows, r0 + step)):
                acc.add_(gb[t].unsqueeze(1) * a[t])
            total = acc if total is None else total.add_(acc)
        out[m0 : m0 + m_block] = total
    return out


def pairwise_fold(parts: list[torch.Tensor]) -> torch.Tensor:
    """Fold partial sums pairwise: a binary counter over the parts (after part c, merge with the
    stack top while c + 1 is even), then the remaining stack folded from the top."""
    stack: list[torch.Tensor] = []
    for c, v in enumerate(parts):
        k = c + 1
        while k % 2 == 0:
            v = stack.pop() + v
            k //= 2
        stack.append(v)
    total = stack.pop()
    while stack:
        total = stack.pop() + total
    return total


def column_sum(x: torch.Tensor) -> torch.Tensor:
    """Sum over rows of x (T, N) in FP32: fixed ROW_CHUNK-row running sums, folded pairwise."""
    x = x.float()
    parts = []
    for r0 in range(0, x.shape[0], ROW_CHUNK):
        part = torch.zeros(x.shape[1], dtype=torch.float32, device=x.device)
        for r in range(r0, min(x.shape[0], r0 + ROW_CHUNK)):
            part.add_(x[r])
        parts.append(part)
    return pairwise_fold(parts)


def _per_row(fn, *rows: torch.Tensor) -> torch.Tensor:
    """Apply an elementwise fn row by row, so every row sees the same shape whatever T is."""
    return torch.stack([fn(*r) for r in zip(*rows)])


def _silu_grad(dy: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """ATen's silu backward formula: dy * sig * (1 + x * (1 - sig)), sig = 1 / (1 + exp(-x))."""
    sig = 1.0 / (1.0 + torch.exp(-x))
    return dy * sig * (1.0 + x * (1.0 - sig))


def adaln_dgrad_partials(dout: torch.Tensor, w: torch.Tensor, splits: int) -> torch.Tensor:
    """(splits, T, D) FP32: bf16(dout) @ w over each of ``splits`` equal chunks of N's rows, one
    chain each, not folded. The backward's d_temb is ``adaln_fold_dgrad`` of its
    ``ADALN_SPLITS_DGRAD`` partials; a rank holding some chunks computes just those."""
    chunk = w.shape[0] // splits
    dout = dout.to(torch.bfloat16)
    return torch.stack(
        [split_k_matmul(dout[:, k : k + chunk], w[k : k + chunk], 1) for k in range(0, w.shape[0], chunk)]
    )


def adaln_fold_dgrad(part: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
    """d_temb from the chunk partials: folded in ascending order, rounded to BF16 once (eager's
    ``bf16(dout @ w)``, whose ``.to(bf16)`` gradient is a cast), then ATen's SiLU backward in FP32."""
    total = part[0]
    for p in part[1:]:
        total = total + p
    return _per_row(_silu_grad, total.to(torch.bfloat16).float(), temb)


# --------------------------------------------------------------------------------------------
# The ops.


class TimestepMLP(torch.autograd.Function):
    """linear(silu(linear(x, w1, b1)), w2, b2), FP32, canonical order; grads for all five inputs."""

    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2):
        h = split_k_matmul(x, w1.t(), TMLP_SPLITS_FC1) + b1
        a = _per_row(F.silu, h)
        out = split_k_matmul(a, w2.t(), TMLP_SPLITS_FC2) + b2
        ctx.save_for_backward(x, w1, w2, h, a)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, dout):
        x, w1, w2, h, a = ctx.saved_tensors
        need_x, need_w1, need_b1, need_w2, need_b2 = ctx.needs_input_grad
        dout = dout.float()
        dx = dw1 = db1 = dw2 = db2 = None
        if need_w2:
            dw2 = rows_outer_sum(dout, a, TMLP_WGRAD_ROWS)
        if need_b2:
            db2 = column_sum(dout)
        if need_x or need_w1 or need_b1:
            dh = _per_row(_silu_grad, split_k_matmul(dout, w2, TMLP_SPLITS_FC2_DGRAD), h)
            if need_x:
                dx = split_k_matmul(dh, w1, TMLP_SPLITS_FC1_DGRAD)
            if need_w1:
                dw1 = rows_outer_sum(dh, x, TMLP_WGRAD_ROWS)
            if need_b1:
                db1 = column_sum(dh)
        return dx, dw1, db1, dw2, db2


class AdalnProjection(torch.autograd.Function):
    """linear(silu(temb).to(bf16), w, b): BF16 operands, FP32 sums, bias added, one BF16 rounding."""

    @staticmethod
    def forward(ctx, temb, w, b):
        a = _per_row(lambda r: F.silu(r).to(torch.bfloat16), temb)
        out = (split_k_matmul(a, w.t(), 1) + b.float()).to(torch.bfloat16)
        ctx.save_for_backward(temb, a, w)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, dout):
        temb, a, w = ctx.saved_tensors
        need_temb, need_w, need_b = ctx.needs_input_grad
        dout = dout.to(torch.bfloat16)
        dtemb = dw = db = None
        if need_temb:
            dtemb = adaln_fold_dgrad(adaln_dgrad_partials(dout, w, ADALN_SPLITS_DGRAD), temb)
        if need_w:
            dw = rows_outer_sum(dout, a).to(torch.bfloat16)
        if need_b:
            db = column_sum(dout).to(torch.bfloat16)
        return dtemb, dw, db


def timestep_mlp(x, w1, b1, w2, b2):
    """Differentiable timestep MLP on any device (PyTorch ops; see the module docstring)."""
    check_timestep_mlp_args(x, w1, b1, w2, b2)
    return TimestepMLP.apply(x, w1, b1, w2, b2)


def adaln_projection(temb, w, b):
    """Differentiable AdaLN projection on any device (PyTorch ops; see the module docstring)."""
    check_adaln_projection_args(temb, w, b)
    return AdalnProjection.apply(temb, w, b)
