"""``audit chain`` across modes: one process per mode, as ``audit run`` does.

The parent (``run_modes``) starts ``python -m audit.chain_worker JOB.json RESULT.json`` once per
mode, with the mode's environment set before torch starts, and waits for it (up to a timeout). The
worker turns TF32 off, switches the mode on (so the provider's GEMMs run under it), replays every
length and writes what it found as JSON. A mode that cannot be switched on, a process that dies
and one that times out each become ``{"unavailable": reason}`` for that mode; the other modes run.

This is its own small entry point rather than ``audit.worker``: the chain is one computation per
length, not candidates x cases, so the runner's per-candidate retry and blame do not apply.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import torch

from modes import get_mode
from modes.environment import mode_environment

from reports.chain import ChainReplay, ChainStage

from .assemble import header
from .candidates import error_text
from .chain import REPEATS, BlockConfig, Choice, run_chain
from .environment import collect
from .runner import log_tail

REPO = Path(__file__).resolve().parent.parent


def main(job_path: str, result_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    mode = get_mode(job["mode"])
    try:
        description = mode.call("enable")
    except Exception as exc:
        Path(result_path).write_text(
            json.dumps({"unavailable": f"mode {mode.name} cannot be switched on: {error_text(exc)}"})
        )
        return 0
    found = {
        "description": description,
        "tf32": torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32,
        "inputs_sha256": {},
        "lengths": {},
    }

    def emit(event: str, **fields) -> None:
        if event == "inputs":
            found["inputs_sha256"][str(fields["length"])] = fields["sha256"]
        else:
            found["lengths"][str(fields["length"])] = fields["data"]
            print(
                f"mode {mode.name}: length {fields['length']} replayed in {fields['data']['wall_s']:.1f} s", flush=True
            )

    @contextmanager
    def mode_off():
        """The FP64 chain runs with the mode switched off where the library can switch it off."""
        if mode.disable is None:
            yield
            return
        mode.call("disable")
        try:
            yield
        finally:
            mode.call("enable")

    choices = {stage: Choice(*choice) for stage, choice in job["choices"].items()}
    run_chain(
        BlockConfig(**job["block"]),
        job["lengths"],
        choices,
        mode.name,
        torch.device(job["device"]),
        job["backward"],
        emit,
        mode_off,
    )
    Path(result_path).write_text(json.dumps(found))
    return 0


def run_modes(job: dict, modes: list[str], timeout: float, say: Callable[[str], None]) -> dict[str, dict]:
    """Each mode's findings (the worker's JSON, or ``{"unavailable": reason}``), plain first."""
    found: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="audit-chain-") as workdir:
        for mode in sorted(modes, key=lambda m: m != "plain"):
            say(f"mode {mode}: replaying lengths {', '.join(map(str, job['lengths']))}")
            found[mode] = _run_one(dict(job, mode=mode), Path(workdir), timeout)
    return found


def _run_one(job: dict, workdir: Path, timeout: float) -> dict:
    job_path, result_path = workdir / f"{job['mode']}.job.json", workdir / f"{job['mode']}.result.json"
    log_path = workdir / f"{job['mode']}.log"
    job_path.write_text(json.dumps(job))
    command = [sys.executable, "-m", "audit.chain_worker", str(job_path), str(result_path)]
    with open(log_path, "wb") as log:
        try:
            done = subprocess.run(
                command,
                env=mode_environment(os.environ, get_mode(job["mode"]))[0],
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
            )
            what = None if done.returncode == 0 and result_path.exists() else f"exited with status {done.returncode}"
        except subprocess.TimeoutExpired:
            what = f"timed out after {timeout:.0f} s"
    if what is None:
        return json.loads(result_path.read_text())
    tail = log_tail(log_path)
    return {"unavailable": f"mode {job['mode']} process {what}:\n{tail}"}


def chain_report(job: dict, found: dict[str, dict]) -> dict:
    """The ``h3_conditioning_chain_replay`` report. A mode whose inputs' fingerprints differ from
    the first mode's becomes unavailable (it would replay a different problem)."""
    ran = [f for f in found.values() if "unavailable" not in f]
    prints = ran[0]["inputs_sha256"] if ran else {}
    results: dict[str, dict] = {}
    for mode, f in found.items():
        if "unavailable" in f:
            results[mode] = f
        elif f["inputs_sha256"] != prints:
            results[mode] = {"unavailable": f"inputs in mode {mode} differ from mode {next(iter(found))}'s"}
        else:
            lengths = {
                length: {**data, **ChainReplay.summary([ChainStage.model_validate(s) for s in data["stages"]])}
                for length, data in f["lengths"].items()
            }
            results[mode] = {"description": f["description"], "lengths": lengths}
    environment = collect(
        torch.device(job["device"]),
        {m: mode_environment(os.environ, get_mode(m))[1] for m in found},
        any(f.get("tf32", False) for f in ran),
    )
    return {
        **header("h3_conditioning_chain_replay", "conditioning_chain", environment),
        "block": job["block"],
        "lengths": job["lengths"],
        "backward": job["backward"],
        "repeats": REPEATS,
        "candidates": {stage: Choice(*choice).label for stage, choice in job["choices"].items()},
        "inputs_sha256": prints,
        "results": results,
    }


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
