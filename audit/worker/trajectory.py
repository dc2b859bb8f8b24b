"""The trajectory worker: ``python -m audit.worker.trajectory JOB.json RESULT.json``, one per mode,
started by ``audit.parent.trajectory`` as the chain worker is (``audit.worker.chain.start``: TF32
off, the mode on, the SDPA setting), then the denoising loops of every length
(``audit.core.trajectory``) under the pinned backend, written as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from audit.core import backends
from audit.core.chain import BlockConfig, Choice
from audit.core.trajectory import run_trajectory
from audit.worker.chain import recorder, start


def main(job_path: str, result_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    started = start(job, result_path)
    if started is None:
        return 0
    mode, found = started
    choices = {stage: Choice(*choice) for stage, choice in job["choices"].items()}
    with backends.pinned(job["attention"]):
        run_trajectory(
            BlockConfig(**job["block"]),
            job["lengths"],
            choices,
            mode.name,
            torch.device(job["device"]),
            job["steps"],
            recorder(mode, found, "denoised"),
        )
    Path(result_path).write_text(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
