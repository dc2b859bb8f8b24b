"""Test doubles for the launcher (loaded through $AUDIT_PLUGINS), for gate_residual, so that ``run``,
``prior-art``, ``chain`` (stage gate_residual_msa) and ``parallel`` can all use them:
- ``leaves_a_child``: starts a helper process that would outlive its worker, writes both pids to
  $LIFECYCLE_DIR, then hangs;
- ``refuses_big_cases``: gate_residual that declares (``accepts``) it takes at most two rows;
- ``sees``: writes the recorded-kind variables (``audit.parent.variables.is_recorded``) its process
  sees to $LIFECYCLE_DIR, then computes gate_residual as diffusers does.
A real library cannot be made to do these on demand."""

import json
import os
import subprocess
import time
from pathlib import Path

import torch

from audit.core.candidates import candidate
from audit.parent.variables import is_recorded


def _folder() -> Path:
    return Path(os.environ["LIFECYCLE_DIR"])


@candidate("leaves_a_child", ops=("gate_residual",), source="test double: starts a helper process, then hangs")
def leaves_a_child(t: dict[str, torch.Tensor]) -> torch.Tensor:
    helper = subprocess.Popen(["sleep", "600"])
    (_folder() / f"pids-{os.getpid()}").write_text(f"{os.getpid()} {helper.pid}")
    time.sleep(600)
    raise AssertionError("unreachable")


@candidate("sees", ops=("gate_residual",), source="test double: records the variables it sees")
def sees(t: dict[str, torch.Tensor]) -> torch.Tensor:
    seen = {k: v for k, v in sorted(os.environ.items()) if is_recorded(k)}
    (_folder() / f"seen-{os.getpid()}.json").write_text(json.dumps(seen))
    return t["res"] + t["gate"].index_select(0, t["idx"]) * t["y"]


def _two_rows_at_most(t: dict[str, torch.Tensor], device: torch.device) -> str | None:
    rows = t["res"].shape[0]
    return None if rows <= 2 else f"{rows} rows: this kernel takes at most 2"


@candidate(
    "refuses_big_cases",
    ops=("gate_residual",),
    source="test double: gate_residual that refuses cases of more than 2 rows (accepts=)",
    accepts=_two_rows_at_most,
)
def refuses_big_cases(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return t["res"] + t["gate"].index_select(0, t["idx"]) * t["y"]
