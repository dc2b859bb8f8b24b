"""Transformer Engine's RMSNorm, without modulation, as a norm_modulate candidate.

Compared: ``transformer_engine.pytorch.RMSNorm(H, eps=1e-5, params_dtype=bf16)`` on the case's x,
with the case's w copied into the module's weight (its backward reads its own parameter, so
gradients with respect to w are not available through the inputs: grad x only). Its output is the
normalised row alone, so it differs from the references' modulated output by construction; the
x gradient is the meaningful comparison. TE's fused CUDA kernel: one row per block, so a row's
output and dx are not expected to depend on the other rows; bitwise equality with torch's
RMSNorm is not assumed.
"""

from __future__ import annotations

import torch

from audit.candidates import candidate
from audit.ops import EPS, HIDDEN


def _source(mode: str, device: torch.device) -> str:
    import transformer_engine

    return f"TE {transformer_engine.__version__} RMSNorm (no modulation)"


@candidate(
    "transformer_engine",
    ops=("norm_modulate",),
    source=_source,
    grads=("x",),
    requires=("transformer_engine.pytorch",),
    cuda_only=True,
)
def transformer_engine(t: dict[str, torch.Tensor]) -> torch.Tensor:
    import transformer_engine.pytorch as te

    x = t["x"]
    norm = te.RMSNorm(HIDDEN, eps=EPS, params_dtype=torch.bfloat16, device=x.device)
    with torch.no_grad():
        norm.weight.copy_(t["w"])
    return norm(x)
