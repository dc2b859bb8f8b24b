"""One rank of ``audit parallel``, started by torchrun (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``
and ``MASTER_PORT`` set): ``python -m torch.distributed.run ... -m audit.worker.rank JOB.json``.

Every rank draws the same seeded inputs as the bitwise audit (so every rank, and the single-process
reference, computes the same problem), computes the candidate on its shard, and the ranks put the
results back together as the layout says: gathered along a dimension, or reduced with the backend's
all-reduce (``native``), by summing every rank's partial in rank order (``fixed_order``) and, for a
candidate that declares one for the layout (``Candidate.chunk_order``), by folding all-gathered
chunk partials in the single-process order (``chunk_order``). Rank 0 also computes the unsharded
candidate and compares each combined tensor with it bitwise, writing one JSON line per case to the
job's results file as soon as the case is done. With the job's ``repeats`` N > 1, the sharded step
(every reduction included) and the single process each run N times, and each comparison says whether
it is repeatable, as in the bitwise audit (``audit.worker.bitwise``). A rank that raises writes
``rank<R>.failed`` with the reason and exits 1; torchrun then stops the others.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

from audit.core.candidates import get_candidate, load_adapters
from audit.core.compare import compare
from audit.core.evaluate import evaluate
from audit.core.inputs import draw_grad_out, draw_inputs
from audit.core.layouts import Layout, layout_for, shard
from audit.core.ops import get_op
from audit.core.packages import bounded, error_text
from audit.worker.bitwise import record_repeat, tensors_of, with_repeatability

REDUCTIONS = ("native", "fixed_order")
INIT_TIMEOUT_S = 300


class DistRanks:
    """``audit.core.candidates.Ranks`` over torch.distributed: tensors travel on ``device`` (the
    rank's GPU under NCCL) and come back on their own device; first dimensions may differ."""

    def __init__(self, device: torch.device):
        self.rank, self.ranks, self.device = dist.get_rank(), dist.get_world_size(), device

    def all_gather(self, t: torch.Tensor) -> list[torch.Tensor]:
        sizes = [torch.zeros(1, dtype=torch.int64, device=self.device) for _ in range(self.ranks)]
        dist.all_gather(sizes, torch.tensor([t.shape[0]], device=self.device))
        rows = [int(n) for n in sizes]
        padded = t.new_zeros((max(rows), *t.shape[1:]), device=self.device)
        padded[: t.shape[0]] = t
        parts = [torch.empty_like(padded) for _ in range(self.ranks)]
        dist.all_gather(parts, padded)
        return [p[:n].to(t.device) for p, n in zip(parts, rows)]

    def broadcast(self, t: torch.Tensor, src: int) -> torch.Tensor:
        out = t.to(self.device).contiguous()
        dist.broadcast(out, src)
        return out.to(t.device)


def gather(t: torch.Tensor, dim: int, ranks: DistRanks) -> torch.Tensor:
    """Every rank's slice along ``dim``, in rank order (slices may differ in size)."""
    parts = ranks.all_gather(t.movedim(dim, 0).contiguous())
    return torch.cat(parts).movedim(0, dim)


def reduce(t: torch.Tensor, how: str) -> torch.Tensor:
    """The sum over ranks: the backend's all-reduce, or every partial summed in rank order."""
    if how == "native":
        out = t.clone().contiguous()
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
        return out
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t.contiguous())
    total = parts[0].clone()
    for p in parts[1:]:
        total = total + p
    return total


def clock(device: torch.device) -> float:
    """Seconds (``time.perf_counter``) once ``device``'s queued work is done."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def sharded_step(
    c, op, layout: Layout, mine: dict, grad: torch.Tensor, ranks: DistRanks
) -> tuple[dict, dict[str, float], str | None]:
    """One sharded evaluation put back together: ({reduction: (outputs, gradients)}, {reduction:
    seconds}, why there is no chunk-order reduction or None). A gathered (or rank-0) tensor is the
    same object under every reduction: it is gathered once, and only the reduced tensors are summed
    each way. A reduction's seconds are this rank's wall time from a barrier: the evaluation and the
    gathers, plus that reduction's sums (for ``chunk_order``, the candidate's chunk-order function,
    and the fixed-order sum of any reduced tensor it does not fold)."""
    device = ranks.device
    dist.barrier()
    start = clock(device)
    outs, grads = evaluate(c, op, mine, grad)
    placed = {("out", i): (o, layout.out) for i, o in enumerate(outs)}
    placed |= {("grad", n): (g, layout.placement(n)) for n, g in grads.items()}
    whole = {
        k: t if where == "rank0" else gather(t, where, ranks)  # rank 0's own gradient, or every rank's slice
        for k, (t, where) in placed.items()
        if where not in ("reduce", "replicate")
    }
    shared = clock(device) - start
    combined, seconds = {}, {}
    for how in REDUCTIONS:
        begun = clock(device)
        done = whole | {k: reduce(t, how) for k, (t, where) in placed.items() if k not in whole}
        seconds[how] = shared + clock(device) - begun
        combined[how] = ([done[("out", i)] for i in range(len(outs))], {n: done[("grad", n)] for n in grads})
    begun = clock(device)
    chunked, no_chunk_order = chunk_order(c, layout, mine, grad, ranks)
    if chunked is not None:
        fixed_outs, fixed_grads = combined["fixed_order"]
        combined["chunk_order"] = (fixed_outs, {n: chunked.get(n, g) for n, g in fixed_grads.items()})
        summed = any(k not in whole and (k[0] == "out" or k[1] not in chunked) for k in placed)
        seconds["chunk_order"] = shared + clock(device) - begun + (seconds["fixed_order"] - shared) * summed
    return combined, seconds, no_chunk_order


def label(key: str) -> str:
    """A tensor key of ``tensors_of`` (``out.0``, ``grad.x``) as the report labels it (``out``, ``dx``)."""
    kind, name = key.split(".", 1)
    return "out" if kind == "out" else f"d{name}"


def single_process(c, op, inputs: dict, grad_out: torch.Tensor, repeats: int, device: torch.device):
    """(the first of ``repeats`` unsharded evaluations' tensors by ``tensors_of`` key, the most
    elements per tensor that a later one changed (None when ``repeats`` is 1), the fastest run's wall
    time in seconds)."""
    first, worst, seconds = None, None, float("inf")
    for _ in range(repeats):
        begun = clock(device)
        run = tensors_of(evaluate(c, op, inputs, grad_out))
        seconds = min(seconds, clock(device) - begun)
        if first is None:
            first, worst = run, (dict.fromkeys(run, 0) if repeats > 1 else None)
        else:
            record_repeat(worst, first, run)
    return first, worst, seconds


def run_case(job: dict, case: int, device: torch.device) -> dict | None:
    """Rank 0: {reduction: comparison} for this case; other ranks: None. With ``repeats`` N > 1 both
    sides run N times; a comparison is repeatable when every run of both sides gave the same bits,
    and ``single_process_repeat_differ`` gives the single process's own repeats per tensor.
    ``step_seconds``: the fastest run's wall time of the single process and, per reduction, of the
    sharded step (``sharded_step``), both on rank 0."""
    op, layout = get_op(job["op"]), layout_for(job["op"], job["layout"])
    c = get_candidate(op.name, job["candidate"])
    rank, ranks, repeats = dist.get_rank(), dist.get_world_size(), job["repeats"]
    inputs = {k: v.to(device) for k, v in draw_inputs(op, case, seed=case).items()}
    grad_out = draw_grad_out(op, case, seed=case).to(device)
    mine = {k: shard(v, layout.placement(k), rank, ranks) for k, v in inputs.items()}
    my_grad = grad_out if layout.grad_out == "replicate" else shard(grad_out, layout.grad_out, rank, ranks)
    ranks_ = DistRanks(torch.device("cuda", torch.cuda.current_device()) if job["backend"] == "nccl" else device)
    combined, seconds, no_chunk_order = sharded_step(c, op, layout, mine, my_grad, ranks_)
    first = {how: tensors_of(result) for how, result in combined.items()}
    sharded_repeats = {how: dict.fromkeys(tensors, 0) for how, tensors in first.items()} if repeats > 1 else None
    for _ in range(repeats - 1):
        again, again_seconds, _ = sharded_step(c, op, layout, mine, my_grad, ranks_)
        seconds = {how: min(s, again_seconds[how]) for how, s in seconds.items()}
        if sharded_repeats is not None and rank == 0:
            for how, result in again.items():
                record_repeat(sharded_repeats[how], first[how], tensors_of(result))
    if rank != 0:
        return None
    ref_tensors, ref_repeats, single_seconds = single_process(c, op, inputs, grad_out, repeats, device)
    compared: dict[int, dict] = {}  # a tensor shared by reductions is compared once

    def cmp(how: str, key: str) -> dict:
        t = first[how][key]
        if id(t) not in compared:
            compared[id(t)] = compare(t, ref_tensors[key])
        mine = sharded_repeats[how] if sharded_repeats is not None else None
        return with_repeatability(compared[id(t)], key, mine, ref_repeats)

    result: dict = {
        how: {
            "out": [cmp(how, f"out.{i}") for i in range(len(combined[how][0])) if f"out.{i}" in ref_tensors],
            "grads": {n: cmp(how, f"grad.{n}") for n in op.grads if f"grad.{n}" in first[how].keys() & ref_tensors},
        }
        for how in combined
    }
    result["step_seconds"] = {how: round(t, 6) for how, t in ({"single_process": single_seconds} | seconds).items()}
    if ref_repeats is not None:
        result["single_process_repeat_differ"] = {label(k): n for k, n in ref_repeats.items()}
    return result | ({"no_chunk_order": no_chunk_order} if no_chunk_order else {})


def chunk_order(c, layout: Layout, mine: dict, grad: torch.Tensor, ranks: DistRanks):
    """(the reduced gradients folded in the candidate's chunk order, None) or (None, why not)."""
    fn = c.chunk_order.get(layout.name)
    if fn is None:
        return None, f"{c.name} declares no chunk order for {layout.name} (its reductions happen inside its library)"
    return fn(mine, grad, ranks), None


def main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    rank = int(os.environ["RANK"])
    folder = Path(job["folder"])
    device = torch.device(job["device"])
    try:
        if device.type == "cuda":
            device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
            torch.cuda.set_device(device)
        dist.init_process_group(job["backend"], timeout=datetime.timedelta(seconds=INIT_TIMEOUT_S))
        load_adapters()
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        for case in job["cases"]:
            result = run_case(job, case, device)
            if result is not None:
                with open(folder / "results.jsonl", "a") as f:
                    f.write(json.dumps({"case": case, **result}) + "\n")
        dist.barrier()
        dist.destroy_process_group()
    except BaseException as exc:
        (folder / f"rank{rank}.failed").write_text(bounded(f"{error_text(exc)}\n{traceback.format_exc(limit=6)}"))
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
