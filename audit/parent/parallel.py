"""``audit parallel``: are sharded computations bitwise equal to the single-process ones?

For each candidate, one ``torchrun`` with N ranks (``audit.worker.rank``) computes every case on
shards as the layout says and compares the combined output and gradients with the same candidate
unsharded, bitwise, for every reduction (the backend's all-reduce, every rank's partial summed
in rank order, and a candidate's own chunk order), each side run ``repeats`` times. A candidate
whose run fails (a rank raising, crashing or timing out) becomes
``{"unavailable": "rank R ...: reason"}``: torchrun stops every rank when one fails, and a run that
passes ``--timeout`` has torchrun and every rank killed, so nothing hangs. Cases finished before
a failure are kept.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from audit.core.candidates import Candidate, candidates_for, unavailable_reason
from audit.core.layouts import Layout, layout_for, shard_shapes
from audit.core.ops import OpSpec
from audit.core.packages import bounded
from audit.parent import launch
from audit.parent.launch import REPO
from audit.parent.variables import is_recorded, worker_variables
from modes import get_mode
from reports.kinds import kind_name
from reports.parallel import ParallelReport

KIND = kind_name(ParallelReport)
NCCL_VARIABLES_RECORDED = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE")


def nccl_environment(backend: str) -> dict[str, str]:
    """The NCCL variables the ranks run with, as the report records them: the shell's algorithm and
    protocol choices, and, under NCCL, NVLink multicast off unless the shell says otherwise."""
    found = {k: os.environ[k] for k in NCCL_VARIABLES_RECORDED if k in os.environ}
    return found | ({"NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE", "0")} if backend == "nccl" else {})


@dataclass
class ParallelPlan:
    op: OpSpec
    layout: Layout
    ranks: int
    backend: str
    device: torch.device
    cases: list[int]
    repeats: int  # runs of each side (sharded and single process) per case
    candidates: list[Candidate]
    cannot_shard: dict[str, str]  # candidates that cannot take this layout's shards, with why
    unavailable: dict[str, str]  # candidates that cannot run here at all (library, device), with why
    variables: dict[str, str]  # torchrun's and the ranks' environment (``rank_variables``)
    recorded: dict[str, str]  # what the report records of it

    def not_run(self) -> dict[str, str]:
        return self.cannot_shard | self.unavailable


def default_backend(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


def shard_problem(
    c: Candidate, op: OpSpec, layout: Layout, ranks: int, cases: list[int], device: torch.device
) -> str | None:
    """Why ``c`` cannot run this layout's shards (None when it can): what the candidate does not
    accept (``Candidate.accepts``) of the largest case's shards, the first and the last rank's (the
    two sizes an uneven split gives). The split itself is checked before (``layouts.split_problem``)."""
    if c.accepts is None:
        return None
    for rank in (0, ranks - 1):
        shapes = shard_shapes(op, layout, rows=max(cases), ranks=ranks, rank=rank)
        meta = {s.name: torch.empty(shapes[s.name], dtype=s.dtype, device="meta") for s in op.inputs}
        if why := c.accepts(meta, device):
            return f"{c.name} cannot take a {ranks}-way {layout.name} shard: {why}"
    return None


def default_cases(op: OpSpec, layout: Layout, ranks: int, device: torch.device) -> list[int]:
    """Rows per case: the op's cases (fewer on a CPU); where the layout splits the rows, multiples
    of ``ranks`` so that every rank gets an equal share."""
    if layout.placement(op.row_inputs[0]) == 0:
        return [ranks * n for n in (1, 64)]
    return list(op.cpu_cases if device.type == "cpu" else op.cases)


def plan_parallel(
    op: OpSpec,
    layout_name: str,
    *,
    ranks: int,
    backend: str | None,
    device: torch.device,
    cases: list[int] | None,
    names: list[str] | None,
    repeats: int = 2,
    inherit: tuple[str, ...] = (),
) -> ParallelPlan:
    """Candidates that run in plain mode for ``op`` (or those named), each checked against the
    shards and against this machine before anything starts; ``cases`` None: ``default_cases``."""
    layout = layout_for(op.name, layout_name)
    cases = cases or default_cases(op, layout, ranks, device)
    chosen = [c for c in candidates_for(op.name) if c.runs_in("plain") and (names is None or c.name in names)]
    cannot_shard, unavailable, runnable = {}, {}, []
    for c in chosen:
        if problem := shard_problem(c, op, layout, ranks, cases, device):
            cannot_shard[c.name] = problem
        elif reason := unavailable_reason(c, device):
            unavailable[c.name] = reason
        else:
            runnable.append(c)
    variables, recorded = rank_variables(inherit)
    return ParallelPlan(
        op,
        layout,
        ranks,
        backend or default_backend(device),
        device,
        cases,
        repeats,
        runnable,
        cannot_shard,
        unavailable,
        variables,
        recorded,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_variables(inherit: tuple[str, ...]) -> tuple[dict[str, str], dict[str, str]]:
    """(torchrun's and the ranks' variables, what the report records of them): plain mode's worker
    variables (``audit.parent.variables``) with this repository first on ``PYTHONPATH``, NVLink
    multicast off unless the shell says otherwise, and one OpenMP thread per rank by default."""
    variables, _ = worker_variables(os.environ, get_mode("plain"), inherit)
    variables |= {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE", "0"),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }
    return variables, {k: v for k, v in sorted(variables.items()) if is_recorded(k)}


def run_candidate(p: ParallelPlan, c: Candidate, *, timeout: float, workdir: Path) -> dict:
    """One torchrun for ``c``: {case: {reduction: comparison}} for every finished case, plus
    ``unavailable`` (which rank failed and why) when the run did not finish. torchrun and every
    rank are one launched tree (``audit.parent.launch``): a deadline or an interruption kills all."""
    folder = workdir / c.name
    folder.mkdir(parents=True)
    job = {
        "op": p.op.name,
        "layout": p.layout.name,
        "candidate": c.name,
        "cases": p.cases,
        "repeats": p.repeats,
        "device": str(p.device),
        "backend": p.backend,
        "folder": str(folder),
    }
    job_path = folder / "job.json"
    job_path.write_text(json.dumps(job))
    command = [
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={p.ranks}",
        "--nnodes=1",
        "--master-addr=127.0.0.1",
        f"--master-port={_free_port()}",
        "--max-restarts=0",
        "-m",
        "audit.worker.rank",
        str(job_path),
    ]
    # torchrun's own temporary directories go into the job's folder, so that they go with it even
    # when torchrun is killed
    variables = {**p.variables, "TMPDIR": str(folder)}
    torchrun = launch.start(command, variables=variables, log=folder / "torchrun.log")
    code = torchrun.wait(time.monotonic() + timeout)
    torchrun.kill()  # a rank that outlived torchrun goes too
    result: dict = {}
    results = folder / "results.jsonl"
    for line in results.read_text().splitlines() if results.exists() else []:
        entry = json.loads(line)
        result[str(entry.pop("case"))] = entry
    if code != 0:
        failed = sorted(folder.glob("rank*.failed"))
        why = "; ".join(f"{f.stem} failed: {f.read_text().splitlines()[0]}" for f in failed)
        why = why or f"torchrun {launch.ended(code, timeout=timeout)}:\n{torchrun.tail()}"
        if code is None:
            why = f"{launch.ended(None, timeout=timeout)}; torchrun and every rank were killed. {why}"
        result["unavailable"] = bounded(why)
    return result


def run_parallel(p: ParallelPlan, *, timeout: float, advance: Callable[[str], None]) -> dict[str, dict]:
    """Every runnable candidate's results, by name (temporary files removed afterwards)."""
    out = {}
    with launch.job_dir(f"parallel-{p.op.name}") as tmp:
        for c in p.candidates:
            started = time.monotonic()
            out[c.name] = run_candidate(p, c, timeout=timeout, workdir=tmp)
            out[c.name]["seconds"] = round(time.monotonic() - started, 1)
            advance(c.name)
    return out
