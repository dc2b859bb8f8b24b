"""PyTorch implementation of the row kernels' algorithms (norm_modulate, gate_residual,
adaln_row_gather), step for step, in separately rounded FP32 tensor ops.

It runs on any device and is both the oracle of the CUDA kernels (``csrc/*.cu``) and the
``rl_kernel`` candidate on the CPU. Every row output and row gradient is computed from its own row
only, with element-wise ops and explicitly ordered sums (never a library reduction), so it is
deterministic and batch-invariant on the CPU as well. Table and parameter gradients are segmented
sums: positions stably sorted by table row, cut into tiles of ``TILE_ROWS`` positions per table row,
each tile summed in sorted order in FP32, a table row's tiles folded in ascending order, cast once.

Equalities with the CUDA kernels:
- exact (same bits): the gather forward (a copy), the gate_residual forward and its d_res, d_y
  and d_gate, the gather backward, and norm_modulate's d_shift;
- exact for every row whose RMS statistic ``rstd`` agrees: the norm_modulate forward row and dx
  row, and then d_scale and dw too. The sum of squares replays the kernel's (and torch's CUDA
  RMSNorm's) order exactly, but the last step is ``torch.rsqrt``, which on the CPU is 1/sqrt while
  CUDA uses the approximate ``rsqrtf``; the two can differ in the last bit, so on the CPU the
  norm_modulate results agree with the GPU only to about one BF16 ulp in the affected rows. On a
  CUDA device ``torch.rsqrt`` is ``rsqrtf`` and ``rms_rstd`` gives torch's own statistic bitwise.
"""

from __future__ import annotations

import math

import torch

from ._row_checks import check_gate_residual, check_norm_modulate, check_row_gather

__all__ = [
    "TILE_ROWS",
    "adaln_row_gather",
    "fold_rows",
    "fold_tiles",
    "gate_residual",
    "gate_residual_partials",
    "norm_modulate",
    "norm_modulate_partials",
    "replay_row_sum",
    "rms_rstd",
]

TILE_ROWS = 64  # positions per tile of a segmented sum (the CUDA kernels use the same)
_ROW_THREADS = 128  # threads of a row block; each takes vectors round-robin

BF16 = torch.bfloat16


def _bf(t: torch.Tensor) -> torch.Tensor:
    """Round FP32 values to BF16 and widen back: the rounding of one eager BF16 op."""
    return t.to(BF16).float()


def replay_row_sum(v: torch.Tensor, vec: int = 4) -> torch.Tensor:
    """Sum each row of the FP32 matrix ``v`` (S, H) in the row kernels' order: 128 threads, thread t
    adds the elements of its ``vec``-element vectors t, t + 128, ... one by one; a shuffle-down tree
    per warp (offsets 16, 8, 4, 2, 1); then (warp0 + warp2) + (warp1 + warp3). With vec=4 this is
    torch's vectorized CUDA RMSNorm statistic (used for rstd); the dx kernel uses vec=8.
    Returns (S,) FP32. H must be a multiple of vec."""
    rows, hidden = v.shape
    per_thread = math.ceil(hidden // vec / _ROW_THREADS)
    width = per_thread * _ROW_THREADS * vec
    padded = v.new_zeros(rows, width)  # padding adds +0.0, which leaves a running sum unchanged
    padded[:, :hidden] = v
    lanes = padded.view(rows, per_thread, _ROW_THREADS, vec)
    acc = v.new_zeros(rows, _ROW_THREADS)
    for k in range(per_thread):
        for e in range(vec):
            acc = acc + lanes[:, k, :, e]
    warps = acc.view(rows, 4, 32)
    offset = 16
    while offset:
        warps = warps[..., :offset] + warps[..., offset : 2 * offset]
        offset //= 2
    w = warps[..., 0]
    return (w[:, 0] + w[:, 2]) + (w[:, 1] + w[:, 3])


def _div(t: torch.Tensor, divisor: int) -> torch.Tensor:
    # a true FP32 division (a Python scalar divisor may be turned into a reciprocal multiply)
    return t / torch.full_like(t, float(divisor))


def rms_rstd(x: torch.Tensor, eps: float) -> torch.Tensor:
    """rsqrt(mean(x^2) + eps) per row of the BF16 matrix x, FP32, with the kernels' summation order."""
    xf = x.float()
    return torch.rsqrt(_div(replay_row_sum(xf * xf), x.shape[1]) + eps)


_CHUNK_ELEMENTS = 1 << 22  # FP32 temporaries of at most ~16 MB per step keep the CPU fast


def _row_chunks(rows: int, hidden: int) -> list[slice]:
    """Row blocks for row-local work (results do not depend on the blocking)."""
    step = max(1, _CHUNK_ELEMENTS // max(hidden, 1))
    return [slice(i, min(i + step, rows)) for i in range(0, rows, step)]


def _col_chunks(rows: int, hidden: int) -> list[slice]:
    """Column blocks for segmented sums (columns are summed independently)."""
    step = max(8, _CHUNK_ELEMENTS // max(rows, 1))
    return [slice(j, min(j + step, hidden)) for j in range(0, hidden, step)]


class _SegmentPlan:
    """Positions stably sorted by table row and cut into tiles of TILE_ROWS per table row.

    ``tile_index`` (tiles, TILE_ROWS) holds the original row of each tile slot (``rows`` = a zero
    padding row); ``seg_tile_index`` (table_rows, most tiles of one table row) holds each table
    row's tiles in ascending order (``tiles`` = a zero padding tile)."""

    def __init__(self, idx: torch.Tensor, table_rows: int):
        rows = idx.shape[0]
        device = idx.device
        sorted_idx, perm = torch.sort(idx, stable=True)
        bounds = torch.searchsorted(sorted_idx, torch.arange(table_rows + 1, device=device))
        counts = bounds[1:] - bounds[:-1]
        tiles_per = (counts + TILE_ROWS - 1) // TILE_ROWS
        tile_start = torch.cat([tiles_per.new_zeros(1), torch.cumsum(tiles_per, 0)])
        self.tiles = int(tile_start[-1])
        self.rows = rows
        self.table_rows = table_rows
        offset = torch.arange(rows, device=device) - bounds[sorted_idx]
        tile_of = tile_start[sorted_idx] + offset // TILE_ROWS
        self.tile_index = torch.full((self.tiles, TILE_ROWS), rows, dtype=torch.int64, device=device)
        self.tile_index[tile_of, offset % TILE_ROWS] = perm
        slots = torch.arange(int(tiles_per.max()), device=device)
        self.seg_tile_index = torch.where(
            slots[None, :] < tiles_per[:, None], tile_start[:-1, None] + slots[None, :], self.tiles
        )

    def tile_segments(self) -> torch.Tensor:
        """The table row of each tile, (tiles,) int64, ascending (tiles in the plan's order)."""
        per = (self.seg_tile_index < self.tiles).sum(1)
        return torch.repeat_interleave(torch.arange(self.table_rows, device=per.device), per)

    def tile_sums(self, hidden: int, terms) -> torch.Tensor:
        """Each tile's FP32 partial, (tiles, hidden): a running sum over the tile's positions in
        sorted order, started from 0. ``terms(cols)`` returns the (S, width) FP32 terms of the
        column slice ``cols``."""
        out = None
        for cols in _col_chunks(self.rows, hidden):
            t = terms(cols)
            if out is None:
                out = t.new_empty(self.tiles, hidden)
            padded = torch.cat([t, t.new_zeros(1, t.shape[1])])  # +0.0 leaves a running sum unchanged
            acc = t.new_zeros(self.tiles, t.shape[1])
            for j in range(TILE_ROWS):
                acc = acc + padded.index_select(0, self.tile_index[:, j])
            out[:, cols] = acc
        return out

    def segment_sums(self, hidden: int, terms) -> torch.Tensor:
        """Fixed-order segmented sums of per-position FP32 terms -> (table_rows, hidden) FP32: the
        tiles' partials (``tile_sums``) folded per table row (``fold_tiles``)."""
        return fold_tiles(self.tile_sums(hidden, terms), self.tile_segments(), self.table_rows)


def fold_tiles(partials: torch.Tensor, segments: torch.Tensor, table_rows: int) -> torch.Tensor:
    """Fold tile partials (tiles, H) FP32 into (table_rows, H): table row k is
    ``((0 + p[t0]) + p[t1]) + ...`` over the tiles whose ``segments`` entry is k, in the order they
    appear. The one fold of the segmented sums (CUDA's ``row_segment_fold`` adds in the same order)."""
    order = torch.argsort(segments, stable=True)
    counts = torch.bincount(segments, minlength=table_rows)
    start = torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])
    padded = torch.cat([partials.index_select(0, order), partials.new_zeros(1, partials.shape[1])])
    seg = partials.new_zeros(table_rows, partials.shape[1])
    for j in range(int(counts.max()) if counts.numel() else 0):
        slot = torch.where(j < counts, start[:-1] + j, partials.shape[0])
        seg = seg + padded.index_select(0, slot)
    return seg


def fold_rows(seg: torch.Tensor) -> torch.Tensor:
    """Sum the rows of (R, H) FP32 in ascending order: ((0 + seg[0]) + seg[1]) + ..."""
    acc = seg.new_zeros(seg.shape[1])
    for k in range(seg.shape[0]):
        acc = acc + seg[k]
    return acc


def _norm_modulate_terms(x, w, scale, idx, grad, rstd) -> dict:
    """Per-position FP32 terms of norm_modulate's segmented sums, as functions of a column slice:
    ``sh`` = g, ``sc`` = g * n, ``w`` = (g * p) * (rstd * x) (dw folds its per-table-row sums)."""
    wf = w.float()
    rcol = rstd[:, None]
    pi = _bf(scale.float() + 1.0).index_select(0, idx)
    return {
        "sh": lambda c: grad[:, c].float(),
        "sc": lambda c: grad[:, c].float() * _bf(wf[c] * (rcol * x[:, c].float())),
        "w": lambda c: (grad[:, c].float() * pi[:, c]) * (rcol * x[:, c].float()),
    }


class _NormModulate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, shift, scale, idx, eps):
        rows, hidden = x.shape
        out = torch.empty_like(x)
        rstd = torch.empty(rows, dtype=torch.float32, device=x.device)
        wf = w.float()
        p = _bf(scale.float() + 1.0)
        shf = shift.float()
        for r in _row_chunks(rows, hidden):
            rstd[r] = rms_rstd(x[r], eps)
            n = _bf(wf * (rstd[r, None] * x[r].float()))
            out[r] = (_bf(n * p[idx[r]]) + shf[idx[r]]).to(BF16)
        ctx.save_for_backward(x, w, scale, idx, rstd)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, w, scale, idx, rstd = ctx.saved_tensors
        need_x, need_w, need_shift, need_scale = ctx.needs_input_grad[:4]
        rows, hidden = x.shape
        wf = w.float()
        p = _bf(scale.float() + 1.0)
        dx = dw = dshift = dscale = None
        if need_x:
            dx = torch.empty_like(x)
            for r in _row_chunks(rows, hidden):
                xf = x[r].float()
                a = wf * (grad[r].float() * p[idx[r]])  # exact: three BF16 factors fit in FP32
                s = replay_row_sum(a * xf, vec=8)
                rs = rstd[r]
                c = _div(rs * rs * rs * s, hidden)
                dx[r] = (rs[:, None] * a - xf * c[:, None]).to(BF16)
        if need_w or need_shift or need_scale:
            plan = _SegmentPlan(idx, scale.shape[0])
            terms = _norm_modulate_terms(x, w, scale, idx, grad, rstd)
            if need_shift:
                dshift = plan.segment_sums(hidden, terms["sh"]).to(BF16)
            if need_scale:
                dscale = plan.segment_sums(hidden, terms["sc"]).to(BF16)
            if need_w:
                dw = fold_rows(plan.segment_sums(hidden, terms["w"])).to(BF16)
        return dx, dw, dshift, dscale, None, None


def _gate_terms(y, grad):
    """gate_residual's d_gate terms g * y, FP32, as a function of a column slice."""
    return lambda c: grad[:, c].float() * y[:, c].float()


class _GateResidual(torch.autograd.Function):
    @staticmethod
    def forward(ctx, res, y, gate, idx):
        rows, hidden = res.shape
        out = torch.empty_like(res)
        gf = gate.float()
        for r in _row_chunks(rows, hidden):
            out[r] = (res[r].float() + _bf(gf[idx[r]] * y[r].float())).to(BF16)
        ctx.save_for_backward(y, gate, idx)
        return out

    @staticmethod
    def backward(ctx, grad):
        y, gate, idx = ctx.saved_tensors
        need_res, need_y, need_gate = ctx.needs_input_grad[:3]
        rows, hidden = y.shape
        dy = dgate = None
        if need_y:
            dy = torch.empty_like(y)
            gf = gate.float()
            for r in _row_chunks(rows, hidden):
                dy[r] = (grad[r].float() * gf[idx[r]]).to(BF16)
        if need_gate:
            plan = _SegmentPlan(idx, gate.shape[0])
            dgate = plan.segment_sums(hidden, _gate_terms(y, grad)).to(BF16)
        return (grad if need_res else None), dy, dgate, None


class _RowGather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, table, idx):
        ctx.save_for_backward(idx)
        ctx.table_rows = table.shape[0]
        return table.index_select(0, idx)

    @staticmethod
    def backward(ctx, grad):
        (idx,) = ctx.saved_tensors
        plan = _SegmentPlan(idx, ctx.table_rows)
        return plan.segment_sums(grad.shape[1], lambda c: grad[:, c].float()).to(BF16), None


def norm_modulate(x, w, shift, scale, idx, eps: float = 1e-5):
    """rms_norm(x, w, eps) * (1 + scale[idx]) + shift[idx], each eager BF16 op rounded separately.

    Gradients: dx row-local (s = sum(w * g * p * x) in the dx kernel's order); d_shift = sum g,
    d_scale = sum g * n, dw = sum (g * p) * (rstd * x) as segmented sums (dw folds the per-table-row
    sums in ascending table-row order)."""
    check_norm_modulate(x, w, shift, scale, idx, eps)
    return _NormModulate.apply(x, w, shift, scale, idx, float(eps))


def gate_residual(res, y, gate, idx):
    """res + gate[idx] * y, bitwise the eager BF16 expression; d_res = the upstream gradient,
    d_y = bf16(g * gate[idx]) (eager's), d_gate a segmented FP32 sum of g * y."""
    check_gate_residual(res, y, gate, idx)
    return _GateResidual.apply(res, y, gate, idx)


def adaln_row_gather(table, idx):
    """table[idx] (a copy); d_table a segmented FP32 sum of the gradient rows, cast once."""
    check_row_gather(table, idx)
    return _RowGather.apply(table, idx)


def norm_modulate_partials(x, w, shift, scale, idx, grad, eps: float = 1e-5):
    """The tile partials of norm_modulate's table and weight gradients before their fold:
    ((3, tiles, H) FP32 for d_shift, d_scale and dw's per-position terms, (tiles,) table row of
    each tile). ``fold_tiles`` of them is bitwise the segmented sums of ``norm_modulate``'s backward
    (then d_shift, d_scale cast once; dw = ``fold_rows`` of the third, cast once)."""
    check_norm_modulate(x, w, shift, scale, idx, eps)
    plan = _SegmentPlan(idx, scale.shape[0])
    terms = _norm_modulate_terms(x, w, scale, idx, grad, rms_rstd(x, eps))
    return torch.stack([plan.tile_sums(x.shape[1], terms[k]) for k in ("sh", "sc", "w")]), plan.tile_segments()


def gate_residual_partials(res, y, gate, idx, grad):
    """The tile partials of gate_residual's d_gate before their fold: ((1, tiles, H) FP32, (tiles,)
    table row of each tile); ``fold_tiles`` of them is bitwise the backward's segmented sum."""
    check_gate_residual(res, y, gate, idx)
    plan = _SegmentPlan(idx, gate.shape[0])
    return plan.tile_sums(y.shape[1], _gate_terms(y, grad))[None], plan.tile_segments()
