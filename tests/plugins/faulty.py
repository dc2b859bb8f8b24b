"""Test doubles for process isolation (loaded through $AUDIT_PLUGINS): candidates that crash
their whole process, raise, hang, exit, flood their output, fail to prepare or show the environment
they saw. A
real library cannot be made to do this on demand."""

import json
import os
import sys
import time

import torch

from audit.core.candidates import candidate
from audit.parent.variables import is_numerics_variable

CRASH_CASE = int(os.environ.get("FAULTY_CRASH_CASE", "0"))


@candidate(
    "crashes", ops=("gate_residual",), source="test double: kills its process (exit 3) from case FAULTY_CRASH_CASE on"
)
def crashes(t: dict[str, torch.Tensor]) -> torch.Tensor:
    if t["res"].shape[0] >= CRASH_CASE:
        os._exit(3)
    return t["res"] + t["gate"].index_select(0, t["idx"]) * t["y"]


@candidate("raises", ops=("gate_residual",), source="test double: raises")
def raises(t: dict[str, torch.Tensor]) -> torch.Tensor:
    raise RuntimeError("planted failure")


def _failing_build(device: torch.device) -> None:
    raise RuntimeError("planted build failure")


@candidate("prepare_fails", ops=("gate_residual",), source="test double: its prepare raises", prepare=_failing_build)
def prepare_fails(t: dict[str, torch.Tensor]) -> torch.Tensor:
    raise AssertionError("unreachable: a candidate whose prepare failed does not compute")


@candidate("hangs", ops=("gate_residual",), source="test double: sleeps forever")
def hangs(t: dict[str, torch.Tensor]) -> torch.Tensor:
    time.sleep(3600)
    raise AssertionError("unreachable")


class PlantedBaseException(BaseException):
    """Not an Exception: escapes the worker's per-candidate handling and ends the process."""


@candidate("exits", ops=("gate_residual",), source="test double: sys.exit(0) in the middle of a case")
def exits(t: dict[str, torch.Tensor]) -> torch.Tensor:
    sys.exit(0)


@candidate("raises_base", ops=("gate_residual",), source="test double: raises a BaseException")
def raises_base(t: dict[str, torch.Tensor]) -> torch.Tensor:
    raise PlantedBaseException("planted process-ending failure")


@candidate("floods", ops=("gate_residual",), source="test double: prints a 20 MB line, then exits 5")
def floods(t: dict[str, torch.Tensor]) -> torch.Tensor:
    print("x" * 20_000_000 + " END OF THE FLOOD", flush=True)
    os._exit(5)


@candidate(
    "env_probe",
    ops=("gate_residual",),
    source=lambda mode, device: (
        "test double; numerics variables it saw: "
        + json.dumps({k: v for k, v in sorted(os.environ.items()) if is_numerics_variable(k)})
    ),
)
def env_probe(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return t["res"] + t["gate"].index_select(0, t["idx"]) * t["y"]
