"""rl_kernel's chunk order on shards (``rl_kernel_ops.sharded``), with ranks as threads of one
process: every reduced gradient, computed from 2, 4 or 8 shards (even and uneven) and folded from
the all-gathered chunk partials, is bitwise the single process's; a naive sum of per-shard
gradients is not. ``audit parallel`` runs the same functions over torch.distributed."""

import dataclasses
import threading

import pytest
import torch

from audit.core.candidates import get_candidate
from audit.core.evaluate import evaluate
from audit.core.inputs import draw_grad_out, draw_inputs
from audit.core.layouts import layout_for, shard
from audit.core.ops import ADALN_OUT, TIME_EMBED, OpSpec, get_op


class ThreadRanks:
    """One rank of a group of threads: all_gather and broadcast through a shared list and a barrier."""

    def __init__(self, rank: int, group: "Group"):
        self.rank, self.ranks, self._group = rank, group.ranks, group

    def all_gather(self, t: torch.Tensor) -> list[torch.Tensor]:
        g = self._group
        g.slots[self.rank] = t.clone()
        g.barrier.wait()
        out = list(g.slots)
        g.barrier.wait()
        return out

    def broadcast(self, t: torch.Tensor, src: int) -> torch.Tensor:
        return self.all_gather(t)[src]


class Group:
    def __init__(self, ranks: int):
        self.ranks, self.slots, self.barrier = ranks, [None] * ranks, threading.Barrier(ranks)

    def run(self, fn) -> list:
        results, errors = [None] * self.ranks, []

        def one(r):
            try:
                results[r] = fn(ThreadRanks(r, self))
            except BaseException as exc:  # surfaced below; the barrier is broken so the others stop
                errors.append(exc)
                self.barrier.abort()

        threads = [threading.Thread(target=one, args=(r,)) for r in range(self.ranks)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return results


def _uneven(t: torch.Tensor, ranks: int, rank: int) -> torch.Tensor:
    """Row shards of sizes 1, 2, ..., with the rest on the last rank."""
    sizes = [r + 1 for r in range(ranks - 1)]
    sizes.append(t.shape[0] - sum(sizes))
    return t.split(sizes)[rank]


# adaln_projection narrowed to N = 96768 / 24 output features: each of the ADALN_SPLITS_DGRAD
# chunks of N still spans two of 8 ranks' column shards and two chunks fill one of 2 ranks' shards,
# as at full size. On row shards K = 2688 / 24 as well: there K is no reduction across ranks (dw and
# db are), and the oracle's K-serial loops take 24 times fewer steps. On column shards d_temb keeps
# all K = 2688 features, each one a fold across ranks.
NARROW = {
    ("adaln_projection", "sp_rows"): (ADALN_OUT // 24, TIME_EMBED // 24),
    ("adaln_projection", "tp_column"): (ADALN_OUT // 24, TIME_EMBED),
}


def _op(name: str, layout: str) -> OpSpec:
    """The op, with (N, K) narrowed where ``NARROW`` says (the fold's chunks and shards keep their layout)."""
    op = get_op(name)
    if (name, layout) not in NARROW:
        return op
    n, k = NARROW[(name, layout)]
    shapes = {"temb": lambda rows: (rows, k), "w": lambda rows: (n, k), "b": lambda rows: (n,)}
    inputs = tuple(dataclasses.replace(i, shape=shapes[i.name]) for i in op.inputs)
    return dataclasses.replace(op, inputs=inputs, out_shape=lambda rows: (rows, n))


def _sharded(op_name: str, layout_name: str, rows: int, ranks: int, even: bool):
    """(the chunk-order gradients of every rank, the naive per-rank sums, the single process's)."""
    op, layout = _op(op_name, layout_name), layout_for(op_name, layout_name)
    c = get_candidate(op_name, "rl_kernel")
    inputs, grad = draw_inputs(op, rows, seed=rows), draw_grad_out(op, rows, seed=rows)

    def split(t, where, rank):
        if where == 0 and not even:
            return _uneven(t, ranks, rank)
        return shard(t, where, rank, ranks)

    def one(r):
        mine = {k: split(v, layout.placement(k), r.rank) for k, v in inputs.items()}
        g = grad if layout.grad_out == "replicate" else split(grad, layout.grad_out, r.rank)
        return c.chunk_order[layout_name](mine, g, r), evaluate(c, op, mine, g)[1]

    done = Group(ranks).run(one)
    _, ref = evaluate(c, op, inputs, grad)
    return [d[0] for d in done], [d[1] for d in done], ref


@pytest.mark.parametrize(
    "op_name, layout_name, rows",
    [
        ("norm_modulate", "sp_rows", 264),
        ("gate_residual", "sp_rows", 264),
        ("adaln_projection", "sp_rows", 40),
    ],
)
@pytest.mark.parametrize("ranks", [2, 4, 8])
@pytest.mark.parametrize("even", [True, False], ids=["even", "uneven"])
def test_row_shards_fold_to_the_single_process_bits(op_name, layout_name, rows, ranks, even):
    got, naive, ref = _sharded(op_name, layout_name, rows, ranks, even)
    reduced = [n[1:] for n in layout_for(op_name, layout_name).reduced(get_op(op_name))]
    for name in reduced:
        for r in range(ranks):  # every rank holds the whole gradient, bitwise the single process's
            assert torch.equal(got[r][name], ref[name]), (name, r)
    summed = {n: sum(g[n].float() for g in naive[1:]) + naive[0][n].float() for n in reduced}
    assert any(not torch.equal(summed[n].to(ref[n].dtype), ref[n]) for n in reduced)  # the naive sum differs


@pytest.mark.parametrize("ranks", [2, 8])
def test_column_shards_fold_d_temb_to_the_single_process_bits(ranks):
    got, naive, ref = _sharded("adaln_projection", "tp_column", 2, ranks, True)
    for r in range(ranks):
        assert torch.equal(got[r]["temb"], ref["temb"]), r
    summed = naive[0]["temb"]
    for g in naive[1:]:
        summed = summed + g["temb"]
    assert not torch.equal(summed, ref["temb"])
