"""One rank of ``audit parallel``, started by torchrun (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``
and ``MASTER_PORT`` set): ``python -m torch.distributed.run ... -m audit.parallel_rank JOB.json``.

Every rank draws the same seeded inputs as the bitwise audit (so every rank, and the single-process
reference, computes the same problem), computes the candidate on its shard, and the ranks put the
results back together as the layout says: gathered along a dimension, or reduced two ways, with
the backend's all-reduce (``native``) and by summing every rank's partial in rank order
(``fixed_order``). Rank 0 also computes the unsharded candidate and compares each combined
tensor with it bitwise, writing one JSON line per case to the job's results file as soon as the
case is done. A rank that raises writes ``rank<R>.failed`` with the reason and exits 1; torchrun
then stops the others.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

from audit.core.candidates import get_candidate, load_adapters

from audit.core.packages import bounded, error_text
from audit.core.compare import compare
from audit.core.evaluate import evaluate
from audit.core.inputs import draw_grad_out, draw_inputs
from audit.core.layouts import Layout, layout_for, shard
from audit.core.ops import get_op

REDUCTIONS = ("native", "fixed_order")
INIT_TIMEOUT_S = 300


def gather(t: torch.Tensor, dim: int) -> torch.Tensor:
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts, dim=dim)


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


def combine(layout: Layout, outs: list[torch.Tensor], grads: dict[str, torch.Tensor]) -> dict:
    """{reduction: (outputs, gradients)}, the whole tensors from this rank's shard as the layout puts
    them together. A gathered (or rank-0) tensor is the same object under both reductions: it is
    gathered once, and only the reduced tensors are summed each way."""

    def both(t: torch.Tensor, where) -> dict[str, torch.Tensor]:
        if where in ("reduce", "replicate"):
            return {how: reduce(t, how) for how in REDUCTIONS}
        whole = t if where == "rank0" else gather(t, where)  # rank 0's own gradient, or every rank's slice
        return dict.fromkeys(REDUCTIONS, whole)

    out_both = [both(o, layout.out) for o in outs]
    grad_both = {name: both(g, layout.placement(name)) for name, g in grads.items()}
    return {how: ([o[how] for o in out_both], {n: g[how] for n, g in grad_both.items()}) for how in REDUCTIONS}


def run_case(job: dict, case: int, device: torch.device) -> dict | None:
    op, layout = get_op(job["op"]), layout_for(job["op"], job["layout"])
    c = get_candidate(op.name, job["candidate"])
    rank, ranks = dist.get_rank(), dist.get_world_size()
    inputs = {k: v.to(device) for k, v in draw_inputs(op, case, seed=case).items()}
    grad_out = draw_grad_out(op, case, seed=case).to(device)
    mine = {k: shard(v, layout.placement(k), rank, ranks) for k, v in inputs.items()}
    my_grad = grad_out if layout.grad_out == "replicate" else shard(grad_out, layout.grad_out, rank, ranks)
    outs, grads = evaluate(c, op, mine, my_grad)
    combined = combine(layout, outs, grads)
    if rank != 0:
        return None
    ref_outs, ref_grads = evaluate(c, op, inputs, grad_out)
    compared: dict[int, dict] = {}  # a tensor shared by both reductions is compared once

    def cmp(t: torch.Tensor, ref: torch.Tensor) -> dict:
        if id(t) not in compared:
            compared[id(t)] = compare(t, ref)
        return compared[id(t)]

    return {
        how: {
            "out": [cmp(o, r) for o, r in zip(c_outs, ref_outs)],
            "grads": {n: cmp(c_grads[n], ref_grads[n]) for n in op.grads if n in c_grads and n in ref_grads},
        }
        for how, (c_outs, c_grads) in combined.items()
    }


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
