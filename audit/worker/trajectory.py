"""The trajectory worker: ``python -m audit.worker.trajectory JOB.json RESULT.json``, one per mode,
started by ``audit.parent.trajectory`` and run as the chain worker is (``audit.worker.chain.serve``:
TF32 off, the mode on, the SDPA setting), with the denoising loops of every length
(``audit.core.trajectory``) under the pinned backend, written as JSON.
"""

from __future__ import annotations

import sys

import torch

from audit.core.chain import BlockConfig
from audit.core.trajectory import run_trajectory
from audit.worker.chain import serve
from audit.worker import leave


def denoise(job: dict, mode, device: torch.device, choices: dict, emit) -> None:
    """Every length's loops (``run_trajectory``)."""
    run_trajectory(BlockConfig(**job["block"]), job["lengths"], choices, mode.name, device, job["steps"], emit)


def main(job_path: str, result_path: str) -> int:
    return serve(job_path, result_path, what="denoised", body=denoise)


if __name__ == "__main__":
    leave(main(*sys.argv[1:3]))
