"""Test double for ``audit parallel`` (loaded through $AUDIT_PLUGINS): gate_residual as diffusers
computes it, except that rank 1 of a sharded run raises, as a rank whose kernel fails would. A real
library cannot be made to fail on one rank on demand."""

import torch
import torch.distributed as dist

from audit.core.candidates import candidate


@candidate("fails_on_rank_1", ops=("gate_residual",), source="test double: raises on rank 1 of a sharded run")
def fails_on_rank_1(t: dict[str, torch.Tensor]) -> torch.Tensor:
    if dist.is_initialized() and dist.get_rank() == 1:
        raise RuntimeError("planted failure on rank 1")
    return t["res"] + t["gate"].index_select(0, t["idx"]) * t["y"]
