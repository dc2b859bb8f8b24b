"""vLLM-Omni's MiniMax-H3 kernels (``vllm_omni.diffusion.layers.indexed_modulation``, vLLM-Omni
>= 0.30) as candidates.

vLLM-Omni's H3 DiT (``vllm_omni/diffusion/models/minimax_h3/minimax_h3_transformer.py``) calls, in
each block, ``rms_norm_indexed_scale_shift(x, norm1.weight, shift_msa, scale_msa, idx, eps)`` (at
every quality, with no guard), ``indexed_gate_rms_norm_scale_shift`` for the msa gate and norm2,
and ``indexed_gate(residual, gate_mlp, h, idx)``; its final layer calls ``indexed_scale_shift_`` in
place on its RMSNorm's output. Candidates, each called as the model calls it:
- ``vllm_omni_rms_norm_indexed_scale_shift`` (norm_modulate): ``rms_norm_indexed_scale_shift(x, w,
  sh, sc, idx, 1e-5)``; the kernel keeps the norm and the modulation in FP32 and rounds once.
- ``vllm_omni_indexed_scale_shift`` (norm_modulate): ``F.rms_norm`` (``nn.RMSNorm``'s forward, the
  norm of diffusers' block), then ``indexed_scale_shift_`` in place on that fresh output (the
  model's final layer norms with vLLM-Omni's own RMSNorm, which on CUDA calls vLLM's compiled
  ``rms_norm``; only the modulation kernel is audited here).
- ``vllm_omni_indexed_gate`` (gate_residual): ``indexed_gate(res, gate, y, idx)``.
Each function launches its Triton kernel unless its first tensor ``is_cpu``; then it runs an eager
torch expression of its own, which is not the kernel. On a CPU device every input is on the CPU, so
``source`` says that path ran. Forward only: the kernels write into buffers with no autograd
function around them (the CPU path would have gradients, but they are not the kernel's).

- ``vllm_omni_indexed_gate_rms_norm_scale_shift`` (gate_residual_norm_modulate):
  ``indexed_gate_rms_norm_scale_shift(res, gate, y, w, sh, sc, idx, 1e-5)``, the block's msa gated
  residual, norm2 and mlp modulation in one kernel; its two outputs (residual, modulated) stacked.
The module imports ``vllm.triton_utils`` and ``vllm_omni/__init__`` imports vLLM's config, so vLLM
(with its own dependencies) must import; otherwise the candidates are unavailable with that reason.
"""

from __future__ import annotations

import importlib

import torch

from adapters.pytorch import torch_rms_norm
from audit.core.candidates import candidate
from audit.core.packages import version
from audit.core.ops import EPS

MODULE = "vllm_omni.diffusion.layers.indexed_modulation"


def _kernel(name: str):
    return getattr(importlib.import_module(MODULE), name)


def _meta(kernel: str, *, op: str, how: str) -> dict:
    def source(mode: str, device: torch.device) -> str:
        path = (
            "its eager CPU path (the input is_cpu), not the Triton kernel"
            if device.type == "cpu"
            else "its Triton kernel"
        )
        return f"vLLM-Omni {version('vllm-omni')} {MODULE}.{kernel}{how}: {path}; forward only"

    return dict(ops=(op,), source=source, grads=(), requires=(f"{MODULE}:{kernel}",))


@candidate(
    "vllm_omni_rms_norm_indexed_scale_shift", **_meta("rms_norm_indexed_scale_shift", op="norm_modulate", how="")
)
def vllm_omni_rms_norm_indexed_scale_shift(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return _kernel("rms_norm_indexed_scale_shift")(t["x"], t["w"], t["sh"], t["sc"], t["idx"], EPS)


@candidate(
    "vllm_omni_indexed_scale_shift",
    **_meta("indexed_scale_shift_", op="norm_modulate", how=" in place after F.rms_norm (nn.RMSNorm's forward)"),
)
def vllm_omni_indexed_scale_shift(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return _kernel("indexed_scale_shift_")(torch_rms_norm(t), t["sh"], t["sc"], t["idx"])


@candidate("vllm_omni_indexed_gate", **_meta("indexed_gate", op="gate_residual", how=""))
def vllm_omni_indexed_gate(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return _kernel("indexed_gate")(t["res"], t["gate"], t["y"], t["idx"])


@candidate(
    "vllm_omni_indexed_gate_rms_norm_scale_shift",
    **_meta("indexed_gate_rms_norm_scale_shift", op="gate_residual_norm_modulate", how=""),
)
def vllm_omni_indexed_gate_rms_norm_scale_shift(t: dict[str, torch.Tensor]) -> torch.Tensor:
    fused = _kernel("indexed_gate_rms_norm_scale_shift")
    return torch.stack(fused(t["res"], t["gate"], t["y"], t["w"], t["sh"], t["sc"], t["idx"], EPS), dim=1)
