"""rl_kernel's reduced gradients computed on shards, bitwise equal to the single process.

Every reduction of the kernels is a fold, in a fixed order, of partials of chunks of rows, and the
chunks depend on the problem (sizes, ``idx``), never on how many ranks hold the rows:
- row ops' table and weight gradients: positions stably sorted by table row, ``TILE_ROWS`` of them
  per tile; each tile a running FP32 sum; a table row's tiles folded in ascending order
  (``reference_rows``);
- adaln_projection's d_temb: ``ADALN_SPLITS_DGRAD`` equal chunks of the N output features, each one
  FP32 chain, folded in ascending order, then the BF16 rounding and the SiLU backward;
- adaln_projection's db: ``ROW_CHUNK``-row column sums folded pairwise (``pairwise_fold``);
- adaln_projection's dw: one chain over all T rows: a single chunk.

On shards, each chunk is computed by the rank holding its first row. The rows of a chunk that
crosses a shard boundary are gathered onto that rank first (a copy). The partials are all-gathered
(a copy) and folded in the single-process order, so the result is bitwise the unsharded kernel's on
the same device, at any rank count and for uneven row shards.

``ranks`` is any object with ``rank``, ``ranks``, ``all_gather(t) -> [t of every rank]`` (first
dimensions may differ) and ``broadcast(t, src) -> t``. Every function runs on the CPU (the oracle)
and on CUDA (the kernels, whose reductions are exposed in the same halves).
"""

from __future__ import annotations

import torch

import rl_kernel_ops
from .reference_gemm import ADALN_SPLITS_DGRAD, ROW_CHUNK, pairwise_fold
from .reference_rows import TILE_ROWS, fold_rows, fold_tiles

BF16 = torch.bfloat16


def _bounds(ranks, rows: int) -> torch.Tensor:
    """(ranks + 1,) first global row of each rank's shard, and the total."""
    sizes = torch.cat(ranks.all_gather(torch.tensor([rows])))
    return torch.cat([sizes.new_zeros(1), torch.cumsum(sizes, 0)])


def _holder(bounds: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """The rank holding each of the global ``rows`` (for a chunk's owner: its first row)."""
    return torch.searchsorted(bounds[1:], rows, right=True)


def owned_rows(ranks, owner: torch.Tensor, bounds: torch.Tensor, shards: dict[str, torch.Tensor]) -> dict:
    """The rows this rank owns (``owner`` == its rank, (rows,) over the global rows), in ascending
    global order, of every tensor in ``shards`` (this rank's shards, split along dim 0): its own, and
    those of later shards, which their holders send (all-gathered; a copy)."""
    me = ranks.rank
    lo, hi = int(bounds[me]), int(bounds[me + 1])
    local = torch.arange(lo, hi)
    leaving = owner[lo:hi] != me
    sent = torch.cat(ranks.all_gather(local[leaving]))
    where = torch.full((int(bounds[-1]),), -1, dtype=torch.int64)
    where[sent] = (hi - lo) + torch.arange(sent.shape[0])
    where[local] = torch.arange(hi - lo)
    pick = where[(owner == me).nonzero().flatten()]
    out = {}
    for name, t in shards.items():
        received = torch.cat(ranks.all_gather(t[leaving.to(t.device)].contiguous()))
        out[name] = torch.cat([t, received]).index_select(0, pick.to(t.device))
    return out


def _tile_first(idx: torch.Tensor, table_rows: int) -> torch.Tensor:
    """Per position, the first position of its segmented-sum tile (``reference_rows``' plan)."""
    sorted_idx, perm = torch.sort(idx, stable=True)
    start = torch.searchsorted(sorted_idx, torch.arange(table_rows + 1))[sorted_idx]
    offset = torch.arange(idx.shape[0]) - start
    first = torch.empty_like(perm)
    first[perm] = perm[start + offset // TILE_ROWS * TILE_ROWS]
    return first


def _fold_row_partials(ranks, partials: torch.Tensor, segments: torch.Tensor, table_rows: int) -> torch.Tensor:
    """Every rank's tile partials (Q, tiles, H), all-gathered in rank order (global tile order within
    a table row) and folded per table row -> (Q, table_rows, H) FP32."""
    gathered = torch.cat(ranks.all_gather(partials.transpose(0, 1).contiguous())).transpose(0, 1)
    order = torch.cat(ranks.all_gather(segments.cpu())).to(partials.device)
    return torch.stack([fold_tiles(q, order, table_rows) for q in gathered])


def _row_op_owned(ranks, t: dict, grad: torch.Tensor, table: str, rows: tuple[str, ...]):
    """(this rank's owned rows of ``rows`` and the gradient, the global row bounds)."""
    table_rows = t[table].shape[0]
    bounds = _bounds(ranks, grad.shape[0])
    idx = torch.cat(ranks.all_gather(t["idx"].cpu()))
    owner = _holder(bounds, _tile_first(idx, table_rows))
    return owned_rows(ranks, owner, bounds, {**{n: t[n] for n in rows}, "idx": t["idx"], "grad": grad})


def norm_modulate(t: dict[str, torch.Tensor], grad: torch.Tensor, ranks) -> dict[str, torch.Tensor]:
    """sp_rows: dw, dsh, dsc from row shards, bitwise the single-process backward's."""
    mine = _row_op_owned(ranks, t, grad, "sc", ("x",))
    partials, segments = rl_kernel_ops.norm_modulate_partials(
        mine["x"], t["w"], t["sh"], t["sc"], mine["idx"], mine["grad"]
    )
    seg = _fold_row_partials(ranks, partials, segments, t["sc"].shape[0])
    return {"w": fold_rows(seg[2]).to(BF16), "sh": seg[0].to(BF16), "sc": seg[1].to(BF16)}


def gate_residual(t: dict[str, torch.Tensor], grad: torch.Tensor, ranks) -> dict[str, torch.Tensor]:
    """sp_rows: dgate from row shards, bitwise the single-process backward's."""
    mine = _row_op_owned(ranks, t, grad, "gate", ("res", "y"))
    partials, segments = rl_kernel_ops.gate_residual_partials(
        mine["res"], mine["y"], t["gate"], mine["idx"], mine["grad"]
    )
    return {"gate": _fold_row_partials(ranks, partials, segments, t["gate"].shape[0])[0].to(BF16)}


def adaln_projection_rows(t: dict[str, torch.Tensor], grad: torch.Tensor, ranks) -> dict[str, torch.Tensor]:
    """sp_rows: dw and db from row shards of temb and the upstream gradient, bitwise the single
    process's. db: each ``ROW_CHUNK``-row chunk summed (from 0, in row order) by the rank holding
    its first row, the chunks folded pairwise in order. dw is one chain over all T rows, so its one
    chunk's rows are all gathered onto rank 0, which runs the kernel's wgrad, and broadcast."""
    bounds = _bounds(ranks, grad.shape[0])
    rows = torch.arange(int(bounds[-1]))
    mine = owned_rows(ranks, _holder(bounds, rows // ROW_CHUNK * ROW_CHUNK), bounds, {"grad": grad})["grad"]
    parts = []
    for r0 in range(0, mine.shape[0], ROW_CHUNK):  # owned chunks are whole and start at multiples of ROW_CHUNK
        part = torch.zeros(mine.shape[1], dtype=torch.float32, device=mine.device)
        for r in range(r0, min(mine.shape[0], r0 + ROW_CHUNK)):
            part = part + mine[r].float()
        parts.append(part)
    local = torch.stack(parts) if parts else grad.new_zeros(0, grad.shape[1], dtype=torch.float32)
    db = pairwise_fold(list(torch.cat(ranks.all_gather(local)))).to(BF16)
    whole = owned_rows(ranks, torch.zeros_like(rows), bounds, {"temb": t["temb"], "grad": grad})
    dw = torch.empty_like(t["w"])
    if ranks.rank == 0:
        w = t["w"].detach().requires_grad_(True)
        out = rl_kernel_ops.adaln_projection(whole["temb"], w, t["b"])
        (dw,) = torch.autograd.grad(out, [w], grad_outputs=whole["grad"])
    return {"w": ranks.broadcast(dw, 0), "b": db}


def adaln_projection_columns(t: dict[str, torch.Tensor], grad: torch.Tensor, ranks) -> dict[str, torch.Tensor]:
    """tp_column: d_temb from shards of w's rows and the upstream gradient's columns, bitwise the
    single process's: each of the ``ADALN_SPLITS_DGRAD`` chunks of N one chain on the rank holding
    its first feature (a chunk that crosses shards has its rows gathered first), the chunk partials
    folded in ascending order, rounded to BF16 once, then the SiLU backward: the backend's
    ``adaln_dgrad_partials`` and ``adaln_fold_dgrad``, the two halves of its own backward."""
    backend = rl_kernel_ops.gemm_backend(t["w"])
    bounds = _bounds(ranks, t["w"].shape[0])
    features = int(bounds[-1])
    chunk = features // ADALN_SPLITS_DGRAD
    owner = _holder(bounds, torch.arange(features) // chunk * chunk)
    mine = owned_rows(ranks, owner, bounds, {"w": t["w"], "g": grad.t().contiguous()})
    owned = mine["w"].shape[0] // chunk  # owned chunks are whole and consecutive
    local = (
        backend.adaln_dgrad_partials(mine["g"].t(), mine["w"], owned)
        if owned
        else grad.new_zeros(0, grad.shape[0], t["w"].shape[1], dtype=torch.float32)
    )
    return {"temb": backend.adaln_fold_dgrad(torch.cat(ranks.all_gather(local)), t["temb"])}
