"""Liger-Kernel's fused modulated RMSNorm (Triton) as a norm_modulate candidate.

Compared: ``LigerModulatedRMSNormFunction.apply(x, w, scale_rows, shift_rows, eps, offset=0.0,
casting_mode="llama", in_place=False)`` with (S, H) per-token modulation rows, gathered either by
``index_select`` (``liger``) or by the in-repo row gather (``liger_rlk_gather``), against the
references' output and their x, w, sh and sc gradients.

Trap: Liger broadcasts modulation rows by leading prefix: with R rows for N tokens, token r uses
row ``r // (N / R)``. Handing it the (9, H) tables would silently modulate token r with the wrong
row, so it only ever receives (S, H) rows, one per token (``liger_rows`` checks this).
``in_place=False``: Liger's default writes dx into the upstream-gradient buffer, which the runner
reuses for every candidate.

Expected, not assumed (the report decides): in "llama" casting mode the forward rounds
``x * rstd`` to BF16 before multiplying by W, then keeps ``* w * (1 + scale) + shift`` in FP32 and
rounds again at the store (two roundings, where eager rounds after every step), and its row sum
is Triton's tree reduction, so bitwise equality with eager is not expected; the per-row forward
and dx do not depend on the other rows; dw is folded from one FP32 partial per program, with the
rows split over the SM count, so it can depend on the row count; sh and sc gradients are Liger's
per-token rows summed by the gather's backward.
"""

from __future__ import annotations

from typing import Callable

import torch

import rl_kernel_ops
from audit.core.candidates import candidate
from audit.core.packages import version
from audit.core.ops import EPS

Gather = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
_META = dict(ops=("norm_modulate",), grads=("x", "w", "sh", "sc"), requires=("liger_kernel.ops",), cuda_only=True)


def index_select_rows(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    return table.index_select(0, idx)


def liger_rows(t: dict[str, torch.Tensor], gather: Gather) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale, shift) as one (S, H) row per token of x; raises if the gather gives anything else,
    since Liger would broadcast a shorter table by leading prefix instead of failing."""
    x = t["x"]
    scale, shift = gather(t["sc"], t["idx"]), gather(t["sh"], t["idx"])
    for name, rows in (("scale", scale), ("shift", shift)):
        if rows.shape != x.shape:
            raise ValueError(
                f"Liger {name} rows have shape {tuple(rows.shape)}; need one row per token, {tuple(x.shape)}"
            )
    return scale, shift


def _liger(t: dict[str, torch.Tensor], gather: Gather) -> torch.Tensor:
    from liger_kernel.ops import LigerModulatedRMSNormFunction

    scale, shift = liger_rows(t, gather)
    # positional: X, W, scale, shift, eps, offset, casting_mode, in_place (liger-kernel 0.8.5)
    return LigerModulatedRMSNormFunction.apply(t["x"], t["w"], scale, shift, EPS, 0.0, "llama", False)


@candidate(
    "liger", source=lambda mode, device: f"Liger {version('liger-kernel')} modulated RMSNorm + index_select", **_META
)
def liger(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return _liger(t, index_select_rows)


@candidate(
    "liger_rlk_gather",
    source=lambda mode, device: f"Liger {version('liger-kernel')} modulated RMSNorm + rl_kernel_ops.adaln_row_gather",
    **_META,
)
def liger_rlk_gather(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return _liger(t, rl_kernel_ops.adaln_row_gather)
