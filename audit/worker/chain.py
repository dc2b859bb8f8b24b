"""The chain worker: ``python -m audit.worker.chain JOB.json RESULT.json``, one per mode, started by
``audit.parent.chain`` with the mode's variables set before torch starts. It turns TF32 off,
switches the mode on (so the provider's GEMMs run under it), replays every length
(``audit.core.chain``) and writes what it found as JSON; a mode that cannot be switched on writes
``{"unavailable": reason}``. With ``--deterministic`` it turns torch's deterministic algorithms on;
the attention stage runs under the pinned SDPA backend (``audit.core.backends``), and the backend
torch ran is recorded; a backend that cannot run at the chain's shapes makes the mode
``{"unavailable": reason}``. The FP64 chain runs with every backend allowed. It prints one line per
replayed length, which the parent relays.
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from typing import Callable
from pathlib import Path

import torch

from modes import get_mode

from audit.core.packages import error_text
from audit.core import backends
from audit.core.candidates import load_adapters
from audit.core.chain import BlockConfig, Choice, run_chain
from audit.worker import leave


def serve(job_path: str, result_path: str, *, what: str, body: Callable) -> int:
    """A worker's whole life: the job read, ``start``, then ``body(job, mode, device, choices, emit)``
    under the job's pinned SDPA backend, and the findings written to ``result_path`` as JSON.
    ``emit`` records each length's fingerprint and data and prints one line per length ("length
    N ``what`` in S s")."""
    job = json.loads(Path(job_path).read_text())
    started = start(job, result_path)
    if started is None:
        return 0
    mode, found = started

    def emit(event: str, **fields) -> None:
        if event == "inputs":
            found["inputs_sha256"][str(fields["length"])] = fields["sha256"]
        else:
            found["lengths"][str(fields["length"])] = fields["data"]
            print(f"mode {mode.name}: length {fields['length']} {what} in {fields['data']['wall_s']:.1f} s", flush=True)

    choices = {stage: Choice(*choice) for stage, choice in job["choices"].items()}
    with backends.pinned(job["attention"]):
        body(job, mode, torch.device(job["device"]), choices, emit)
    Path(result_path).write_text(json.dumps(found))
    return 0


def start(job: dict, result_path: str):
    """The adapters and $AUDIT_PLUGINS loaded, TF32 off, the job's mode switched on, then its SDPA
    setting (``backends.switch_on``). Returns
    (the mode, the findings so far), or None after writing ``{"unavailable": reason}`` to
    ``result_path`` when the mode cannot be switched on or the pinned backend cannot run here."""
    load_adapters()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    mode = get_mode(job["mode"])
    try:
        description = mode.call("enable")
    except Exception as exc:
        Path(result_path).write_text(
            json.dumps({"unavailable": f"mode {mode.name} cannot be switched on: {error_text(exc)}"})
        )
        return None
    block = job["block"]
    sdpa = backends.switch_on(
        backends.Setting(job["attention"], job["deterministic"]),
        heads=block["heads"],
        head_dim=block["head_dim"],
        lengths=job["lengths"],
        device=torch.device(job["device"]),
        backward=job.get("backward", False),
    )
    if "unavailable" in sdpa:
        Path(result_path).write_text(json.dumps(sdpa))
        return None
    found = {
        "description": description,
        "sdpa_backend": sdpa["ran"],
        "tf32": torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32,
        "inputs_sha256": {},
        "lengths": {},
    }
    return mode, found


def replay(job: dict, mode, device: torch.device, choices: dict, emit: Callable) -> None:
    """Every length replayed (``run_chain``); the FP64 chain with the mode switched off where the
    library can switch it off, and every SDPA backend allowed."""

    @contextmanager
    def mode_off():
        with backends.unpinned():
            if mode.disable is None:
                yield
                return
            mode.call("disable")
            try:
                yield
            finally:
                mode.call("enable")

    run_chain(BlockConfig(**job["block"]), job["lengths"], choices, mode.name, device, job["backward"], emit, mode_off)


def main(job_path: str, result_path: str) -> int:
    return serve(job_path, result_path, what="replayed", body=replay)


if __name__ == "__main__":
    leave(main(*sys.argv[1:3]))
