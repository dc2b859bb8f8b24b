"""vLLM's batch-invariant mode (the ``vllm`` mode) and its batch-invariant RMSNorm.

``enable_batch_invariant_mode()`` registers aten overrides for the whole process. On sm_90 and
newer it keeps cuBLAS for matmul and relies on the mode's environment (CUBLAS_WORKSPACE_CONFIG,
CUBLASLT_WORKSPACE_SIZE, set before torch starts) to fix cuBLAS's algorithm, and overrides mean,
softmax and bmm. vLLM offers no way to switch it off again, so the mode has no ``disable``.
The module moved between versions: ``vllm.model_executor.determinism.batch_invariant`` (current),
``vllm.model_executor.layers.batch_invariant`` (earlier); the one the installed vLLM ships is used,
for the mode and for the candidate alike.

Candidate ``vllm_bi_rmsnorm`` (norm_modulate): ``rms_norm_batch_invariant(x, w, eps=1e-5)`` from
that module (its default eps is 1e-6), modulated with ``index_select`` like the references. It is
one Triton program per row (sum of squares in FP32, ``x * (1 / sqrt(ms + eps)) * w`` in FP32,
rounded once), written into a fresh tensor with no autograd graph: forward only, so only its
output is compared.
"""

from __future__ import annotations

import importlib

import torch

from adapters.diffusers import modulate
from audit.core.candidates import candidate
from audit.core.packages import import_problem, shipped_module, version
from audit.core.ops import EPS

MODULES = (
    "vllm.model_executor.determinism.batch_invariant",
    "vllm.model_executor.layers.batch_invariant",
)
MODULE = shipped_module(MODULES)


def batch_invariant_module():
    """The installed vLLM's batch-invariant module; ImportError with the reason otherwise."""
    problem = import_problem(MODULE)
    if problem:
        raise ImportError(problem)
    return importlib.import_module(MODULE)


def mode_problem(mode) -> str | None:
    """Why the vllm mode cannot run here: its batch-invariant module (either path) must import."""
    return import_problem(MODULE)


def enable_mode(mode) -> str:
    module = batch_invariant_module()
    module.enable_batch_invariant_mode()
    return f"vLLM {version('vllm')} {module.__name__}.enable_batch_invariant_mode() [{mode.name}]"


@candidate(
    "vllm_bi_rmsnorm",
    ops=("norm_modulate",),
    source=lambda mode, device: (
        f"vLLM {version('vllm')} {MODULE}.rms_norm_batch_invariant + index_select (forward only)"
    ),
    grads=(),
    requires=(MODULE,),
    cuda_only=True,
)
def vllm_bi_rmsnorm(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return modulate(batch_invariant_module().rms_norm_batch_invariant(t["x"], t["w"], EPS), t)
