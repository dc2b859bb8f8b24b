"""Test doubles for process isolation (loaded through $AUDIT_PLUGINS): candidates that crash
their whole process, raise, or hang. A real library cannot be made to do this on demand."""

import os
import time

import torch

from audit.candidates import candidate

CRASH_CASE = int(os.environ.get("FAULTY_CRASH_CASE", "0"))


@candidate("crashes", ops=("gate_residual",), source="test double: kills its process (exit 3) from case FAULTY_CRASH_CASE on")
def crashes(t: dict[str, torch.Tensor]) -> torch.Tensor:
    if t["res"].shape[0] >= CRASH_CASE:
        os._exit(3)
    return t["res"] + t["gate"].index_select(0, t["idx"]) * t["y"]


@candidate("raises", ops=("gate_residual",), source="test double: raises")
def raises(t: dict[str, torch.Tensor]) -> torch.Tensor:
    raise RuntimeError("planted failure")


@candidate("hangs", ops=("gate_residual",), source="test double: sleeps forever")
def hangs(t: dict[str, torch.Tensor]) -> torch.Tensor:
    time.sleep(3600)
    raise AssertionError("unreachable")
