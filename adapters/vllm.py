"""vLLM's batch-invariant mode (the ``vllm`` mode).

``enable_batch_invariant_mode()`` registers aten overrides for the whole process. On sm_90 and
newer it keeps cuBLAS for matmul and relies on the mode's environment (CUBLAS_WORKSPACE_CONFIG,
CUBLASLT_WORKSPACE_SIZE, set before torch starts) to fix cuBLAS's algorithm, and overrides mean,
softmax and bmm. vLLM offers no way to switch it off again, so the mode has no ``disable``.
The module moved between versions: ``vllm.model_executor.determinism.batch_invariant`` (current),
``vllm.model_executor.layers.batch_invariant`` (earlier); the first that imports is used.
"""

from __future__ import annotations

import importlib

from audit.candidates import import_problem, version

MODULES = (
    "vllm.model_executor.determinism.batch_invariant",
    "vllm.model_executor.layers.batch_invariant",
)


def batch_invariant_module():
    """The installed vLLM's batch-invariant module; ImportError with every path's reason otherwise."""
    problems = []
    for path in MODULES:
        problem = import_problem(path)
        if problem is None:
            return importlib.import_module(path)
        problems.append(problem)
    raise ImportError("; ".join(dict.fromkeys(problems)))


def enable_mode(mode) -> str:
    module = batch_invariant_module()
    module.enable_batch_invariant_mode()
    return f"vLLM {version('vllm')} {module.__name__}.enable_batch_invariant_mode() [{mode.name}]"
