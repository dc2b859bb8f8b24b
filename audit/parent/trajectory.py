"""``audit trajectory`` across modes: one trajectory worker per mode (``audit.worker.trajectory``),
started as the chain's are (``audit.parent.chain.run_modes``), and the ``h3_denoising_trajectory``
report assembled from what they found.
"""

from __future__ import annotations

from audit.core.chain import REPEATS, labels
from audit.core.trajectory import SCHEDULE
from audit.parent.assemble import header
from audit.parent.chain import mode_results, sdpa_record
from audit.core.names import TRAJECTORY_OP as OP
from reports.kinds import kind_name
from reports.trajectory import Step, Trajectory, TrajectoryReport

KIND = kind_name(TrajectoryReport)
WORKER = "audit.worker.trajectory"


def trajectory_report(job: dict, found: dict[str, dict], recorded: dict[str, dict[str, str]]) -> dict:
    """The ``h3_denoising_trajectory`` report (modes as ``audit.parent.chain.mode_results`` gives them)."""
    prints, results, environment = mode_results(
        job, found, recorded, lambda data: Trajectory.summary([Step.model_validate(s) for s in data["steps"]])
    )
    return {
        **header(KIND, OP, environment),
        "block": job["block"],
        "lengths": job["lengths"],
        "steps": job["steps"],
        "schedule": SCHEDULE,
        "timesteps": job["timesteps"],
        "repeats": REPEATS,
        "candidates": labels(job["choices"]),
        "inputs_sha256": prints,
        "sdpa": sdpa_record(job, found),
        "results": results,
    }
