"""``audit parallel``: are sharded computations bitwise equal to the single-process ones?

For each candidate, one ``torchrun`` with N ranks (``audit.parallel_rank``) computes every case on
shards as the layout says and compares the combined output and gradients with the same candidate
unsharded, bitwise, for both reductions (the backend's all-reduce, and every rank's partial summed
in rank order). A candidate whose run fails (a rank raising, crashing or timing out) becomes
``{"unavailable": "rank R ...: reason"}``: torchrun stops every rank when one fails, and a run that
passes ``--timeout`` has its whole process group killed, so nothing hangs. Cases finished before
a failure are kept.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from .candidates import Candidate, bounded, candidates_for, unavailable_reason
from .environment import REPO
from .layouts import Layout, layout_for, shard_shapes, uneven
from .ops import OpSpec
from .runner import log_tail

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
    candidates: list[Candidate]
    cannot_shard: dict[str, str]  # candidates that cannot take this layout's shards, with why
    unavailable: dict[str, str]  # candidates that cannot run here at all (library, device), with why

    def not_run(self) -> dict[str, str]:
        return self.cannot_shard | self.unavailable


def default_backend(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


def shard_problem(
    c: Candidate, op: OpSpec, layout: Layout, ranks: int, cases: list[int], device: torch.device
) -> str | None:
    """Why ``c`` cannot run this layout's shards (None when it can): uneven splits for anyone;
    for rl_kernel's GEMM kernels, the split counts of its reference and, on a GPU, 128-wide tiles."""
    for rows in cases:
        why = uneven(op, layout, rows, ranks)
        if why:
            return why
    if c.name != "rl_kernel" or op.kind != "gemm":
        return None
    from rl_kernel_ops import reference_gemm

    shapes = shard_shapes(op, layout, max(cases), ranks)
    meta = {s.name: torch.empty(shapes[s.name], dtype=s.dtype, device="meta") for s in op.inputs}
    check = (
        reference_gemm.check_timestep_mlp_args
        if op.name == "timestep_mlp"
        else reference_gemm.check_adaln_projection_args
    )
    try:
        check(*meta.values())
    except ValueError as exc:
        return f"rl_kernel cannot take a {ranks}-way {layout.name} shard: {exc}"
    if device.type == "cuda":
        odd = {n: s for n, s in shapes.items() if op.input(n).rows is False and any(d % 128 for d in s)}
        if odd:
            name, shape = next(iter(odd.items()))
            return f"rl_kernel's CUDA tiles need weight dimensions that are multiples of 128; {name}'s shard is {shape}"
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
    ranks: int,
    backend: str | None,
    device: torch.device,
    cases: list[int] | None,
    names: list[str] | None,
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
    return ParallelPlan(
        op, layout, ranks, backend or default_backend(device), device, cases, runnable, cannot_shard, unavailable
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_candidate(p: ParallelPlan, c: Candidate, timeout: float, workdir: Path) -> dict:
    """One torchrun for ``c``: {case: {reduction: comparison}} for every finished case, plus
    ``unavailable`` (which rank failed and why) when the run did not finish."""
    folder = workdir / c.name
    folder.mkdir(parents=True)
    job = {
        "op": p.op.name,
        "layout": p.layout.name,
        "candidate": c.name,
        "cases": p.cases,
        "device": str(p.device),
        "backend": p.backend,
        "folder": str(folder),
    }
    job_path = folder / "job.json"
    job_path.write_text(json.dumps(job))
    log = folder / "torchrun.log"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        **nccl_environment("nccl"),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={p.ranks}",
        "--nnodes=1",
        "--master-addr=127.0.0.1",
        f"--master-port={_free_port()}",
        "--max-restarts=0",
        "-m",
        "audit.parallel_rank",
        str(job_path),
    ]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            command,
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            code = proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            code, timed_out = proc.wait(), True
        except BaseException:  # interrupted: no rank outlives the audit
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    result: dict = {}
    results = folder / "results.jsonl"
    for line in results.read_text().splitlines() if results.exists() else []:
        entry = json.loads(line)
        result[str(entry.pop("case"))] = entry
    if code != 0 or timed_out:
        failed = sorted(folder.glob("rank*.failed"))
        if failed:
            why = "; ".join(f"{f.stem} failed: {f.read_text().splitlines()[0]}" for f in failed)
        else:
            why = f"torchrun exited with status {code}:\n{log_tail(log)}"
        if timed_out:
            why = f"timed out after {timeout:.0f} s; every rank was killed. {why}"
        result["unavailable"] = bounded(why)
    return result


def run_parallel(p: ParallelPlan, timeout: float, advance: Callable[[str], None]) -> dict[str, dict]:
    """Every runnable candidate's results, by name (temporary files removed afterwards)."""
    out = {}
    with tempfile.TemporaryDirectory(prefix=f"audit-parallel-{p.op.name}-") as tmp:
        for c in p.candidates:
            started = time.monotonic()
            out[c.name] = run_candidate(p, c, timeout, Path(tmp))
            out[c.name]["seconds"] = round(time.monotonic() - started, 1)
            advance(c.name)
    return out
