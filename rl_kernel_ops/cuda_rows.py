"""CUDA backend of the row ops: autograd Functions over the kernels in ``csrc/norm_modulate.cu``,
``csrc/gate_residual.cu``, ``csrc/row_gather.cu`` and ``csrc/row_segments.cu``.

Same functions, signatures and algorithms as ``reference_rows`` (read its docstring for what equals
what). Properties:
- norm_modulate and gate_residual forwards are bitwise equal to the eager BF16 expressions on the
  same GPU; the gather forward is a copy; gate_residual's d_res (the upstream gradient itself) and
  d_y are bitwise equal to eager autograd's;
- row outputs and row gradients come from one row's data with a fixed thread layout: batch-invariant;
- table and parameter gradients: positions in the order of ``torch.sort(idx, stable=True)`` (a
  counting sort up to 256 table rows and 65536 positions, torch.sort itself beyond; up to 8192
  positions norm_modulate's forward sorts it in its own launch when the tables need gradients,
  else the backward by ``row_sort_plan``: one block up to 8192 positions, else blocks of 4096),
  per-tile FP32 partial sums in sorted order, tiles folded in ascending order, cast to BF16 once
  (by the fold's own launch; norm_modulate's dw, the w sums of the table rows added in table-row
  order, comes from that launch too) — deterministic, and no sum uses atomics (the counting sort
  counts with shared-memory integer atomics, which give the same counts in any order).
Inputs are validated (``_row_checks``) before anything is launched; the index range check reads
two numbers back from the GPU the first time an index tensor is seen (a synchronization), and is
skipped while the same unmodified idx is reused. The backward never synchronizes.
"""

from __future__ import annotations

import torch

from ._build import load_extension
from ._checks import kernel_layout
from ._row_checks import check_gate_residual, check_norm_modulate, check_row_gather
from .reference_rows import TILE_ROWS

__all__ = ["adaln_row_gather", "gate_residual", "gate_residual_partials", "norm_modulate", "norm_modulate_partials"]


def _ops():
    load_extension()
    return torch.ops.rl_kernel_ops


def _sort_key_dtype(table_rows: int) -> torch.dtype:
    """The narrowest integer type that holds every table row (idx is range-checked before): a stable
    sort of it is the same permutation in fewer radix passes than one of int64."""
    if table_rows <= 256:
        return torch.uint8
    return torch.int16 if table_rows <= 32768 else torch.int64


# Limits of row_sort_plan (csrc/row_sort.cuh: kSortMaxKeys, kSortMaxRows) and of the plan sorted
# by norm_modulate's forward (csrc/norm_modulate.cu: kFwdPlanMaxRows); a CPU test reads them against
# those constants (tests/rl_kernel_ops/test_reference_rows.py).
SORT_PLAN_MAX_TABLE_ROWS, SORT_PLAN_MAX_ROWS, FORWARD_PLAN_MAX_ROWS = 256, 65536, 8192


def _tile_bound(rows: int, table_rows: int) -> int:
    """An upper bound on the plan's tiles: ceil(count / TILE_ROWS) per table row."""
    return -(-rows // TILE_ROWS) + table_rows


def _plan(ops, idx: torch.Tensor, table_rows: int):
    """Stable sort of the positions by table row and the tile plan of the segmented sums: a
    counting sort where it fits (row_sort_plan), else torch.sort on narrowed keys and
    row_segment_plan. Both give the permutation of torch.sort(idx, stable=True)."""
    if table_rows <= SORT_PLAN_MAX_TABLE_ROWS and idx.shape[0] <= SORT_PLAN_MAX_ROWS:
        perm, seg_start, tile_start = ops.row_sort_plan(idx, table_rows, TILE_ROWS)
    else:
        sorted_keys, perm = torch.sort(idx.to(_sort_key_dtype(table_rows)), stable=True)
        seg_start, tile_start = ops.row_segment_plan(sorted_keys.long(), table_rows, TILE_ROWS)
    return perm, seg_start, tile_start, _tile_bound(idx.shape[0], table_rows)


class _NormModulate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, shift, scale, idx, eps, sort_plan):
        if sort_plan:  # the backward's plan, sorted by one more block of the forward's launch
            out, rstd, *plan = _ops().norm_modulate_fwd_plan(x, w, shift, scale, idx, eps, TILE_ROWS)
        else:
            (out, rstd), plan = _ops().norm_modulate_fwd(x, w, shift, scale, idx, eps), []
        ctx.save_for_backward(x, w, scale, idx, rstd, *plan)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, w, scale, idx, rstd, *sorted_plan = ctx.saved_tensors
        need_x, need_w, need_shift, need_scale = ctx.needs_input_grad[:4]
        ops = _ops()
        grad = kernel_layout(grad)
        dx = dw = dshift = dscale = None
        need_tables = need_w or need_shift or need_scale
        if need_tables and x.shape[0] > 0:
            if sorted_plan:
                perm, seg_start, tile_start = sorted_plan
                tiles = _tile_bound(x.shape[0], scale.shape[0])
            else:
                perm, seg_start, tile_start, tiles = _plan(ops, idx, scale.shape[0])
            plan = (perm, seg_start, tile_start, tiles, TILE_ROWS)
            if need_x:  # dx and the partial sums from one pass over grad and x
                dx, partials = ops.norm_modulate_bwd(grad, x, rstd, w, scale, idx, *plan)
            else:
                partials = ops.norm_modulate_bwd_partials(grad, x, rstd, w, scale, *plan)
            # (3, R, H): shift, scale, w; dw, the w plane folded on over the table rows, in the same launch
            _, seg_bf16, w_total = ops.row_segment_fold_total(partials, tile_start)
        else:
            if need_x:
                dx = ops.norm_modulate_bwd_dx(grad, x, rstd, w, scale, idx)
            if need_tables:  # no rows: zero table and parameter gradients
                seg_bf16, w_total = scale.new_zeros((3, *scale.shape)), torch.zeros_like(w)
        if need_tables:
            dshift = seg_bf16[0] if need_shift else None
            dscale = seg_bf16[1] if need_scale else None
            dw = w_total if need_w else None
        return dx, dw, dshift, dscale, None, None, None


class _GateResidual(torch.autograd.Function):
    @staticmethod
    def forward(ctx, res, y, gate, idx):
        out = _ops().gate_residual_fwd(res, y, gate, idx)
        ctx.save_for_backward(y, gate, idx)
        return out

    @staticmethod
    def backward(ctx, grad):
        y, gate, idx = ctx.saved_tensors
        need_res, need_y, need_gate = ctx.needs_input_grad[:3]
        dy = dgate = None
        if need_y or need_gate:
            if y.shape[0] == 0:
                dy, dgate = torch.empty_like(y), torch.zeros_like(gate)
            else:
                ops = _ops()
                perm, seg_start, tile_start, tiles = _plan(ops, idx, gate.shape[0])
                dy, partials = ops.gate_residual_bwd(
                    kernel_layout(grad), y, gate, perm, seg_start, tile_start, tiles, TILE_ROWS
                )
                dgate = ops.row_segment_fold(partials, tile_start)[1][0]
        return (grad if need_res else None), (dy if need_y else None), (dgate if need_gate else None), None


class _RowGather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, table, idx):
        out = _ops().row_gather_fwd(table, idx)
        ctx.save_for_backward(idx)
        ctx.table_shape = tuple(table.shape)
        return out

    @staticmethod
    def backward(ctx, grad):
        (idx,) = ctx.saved_tensors
        if idx.shape[0] == 0:
            return grad.new_zeros(ctx.table_shape), None
        ops = _ops()
        perm, seg_start, tile_start, tiles = _plan(ops, idx, ctx.table_shape[0])
        partials = ops.row_gather_bwd_partials(kernel_layout(grad), perm, seg_start, tile_start, tiles, TILE_ROWS)
        return ops.row_segment_fold(partials, tile_start)[1][0], None


def norm_modulate(x, w, shift, scale, idx, eps: float = 1e-5):
    """rms_norm(x, w, eps) * (1 + scale[idx]) + shift[idx] on the GPU (see module docstring)."""
    check_norm_modulate(x, w, shift, scale, idx, eps)
    sort_plan = (
        torch.is_grad_enabled()
        and any(t.requires_grad for t in (w, shift, scale))
        and 0 < x.shape[0] <= FORWARD_PLAN_MAX_ROWS
        and scale.shape[0] <= SORT_PLAN_MAX_TABLE_ROWS
    )
    return _NormModulate.apply(x, w, shift, scale, idx.contiguous(), float(eps), sort_plan)


def gate_residual(res, y, gate, idx):
    """res + gate[idx] * y on the GPU (see module docstring)."""
    check_gate_residual(res, y, gate, idx)
    return _GateResidual.apply(res, y, gate, idx.contiguous())


def adaln_row_gather(table, idx):
    """table[idx] on the GPU; backward a fixed-order segmented FP32 sum (see module docstring)."""
    check_row_gather(table, idx)
    return _RowGather.apply(table, idx.contiguous())


def _tile_segments(tile_start: torch.Tensor) -> torch.Tensor:
    """The table row of each tile, (tiles,) int64, from the plan's tile_start (R + 1,)."""
    counts = (tile_start[1:] - tile_start[:-1]).long()
    return torch.repeat_interleave(torch.arange(counts.shape[0], device=counts.device), counts)


def norm_modulate_partials(x, w, shift, scale, idx, grad, eps: float = 1e-5):
    """``reference_rows.norm_modulate_partials`` on the GPU: the tile partials the backward's
    ``norm_modulate_bwd_partials`` kernel writes, before ``row_segment_fold``; rstd from the forward
    kernel (row-local, so the bits the backward saves)."""
    check_norm_modulate(x, w, shift, scale, idx, eps)
    ops = _ops()
    idx = idx.contiguous()
    _, rstd = ops.norm_modulate_fwd(x, w, shift, scale, idx, float(eps))
    perm, seg_start, tile_start, tiles = _plan(ops, idx, scale.shape[0])
    partials = ops.norm_modulate_bwd_partials(
        kernel_layout(grad), x, rstd, w, scale, perm, seg_start, tile_start, tiles, TILE_ROWS
    )
    segments = _tile_segments(tile_start)
    return partials[:, : segments.shape[0]], segments


def gate_residual_partials(res, y, gate, idx, grad):
    """``reference_rows.gate_residual_partials`` on the GPU: the tile partials of
    ``gate_residual_bwd``, before ``row_segment_fold``."""
    check_gate_residual(res, y, gate, idx)
    ops = _ops()
    perm, seg_start, tile_start, tiles = _plan(ops, idx.contiguous(), gate.shape[0])
    _, partials = ops.gate_residual_bwd(kernel_layout(grad), y, gate, perm, seg_start, tile_start, tiles, TILE_ROWS)
    segments = _tile_segments(tile_start)
    return partials[:, : segments.shape[0]], segments
