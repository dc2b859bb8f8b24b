"""The variables a worker process gets, and what of them the report records.

The invoking shell must not change what a worker computes unrecorded. Every variable a worker
sees is one of three kinds:
- **numerics** (a mode sets it, or a compared library, torch, Triton, cuBLAS or cuDNN reads it for
  its numerics or its kernel choice): removed, unless named with ``--inherit-env``; then kept and
  recorded. A mode's own variables are applied on top and recorded.
- **process-shaping** (what is imported and loaded, which devices are seen, how ranks talk and
  which rl_kernel_ops kernels are picked: ``PYTHONPATH``, ``LD_PRELOAD``, ``LD_LIBRARY_PATH``,
  ``PYTHONHASHSEED``, ``CUDA_VISIBLE_DEVICES``, ``NCCL_*``, ``OMP_*``, ``RL_KERNEL_OPS_*``): kept, as
  a GPU machine may need them to run at all, and recorded.
- anything else (``PATH``, ``HOME``, locale, ``TMPDIR``): kept, not recorded.

The report's ``mode_environment`` lists, per mode, exactly the recorded ones.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from modes import MODES, Mode

NUMERICS_VARIABLES = frozenset(
    {
        "CUBLAS_WORKSPACE_CONFIG",
        "CUBLASLT_WORKSPACE_SIZE",
        "NVIDIA_TF32_OVERRIDE",
    }
    | {name for m in MODES.values() for name in m.env}
)
NUMERICS_PREFIXES = ("NVTE_", "VLLM_", "SGLANG_", "TORCH_", "PYTORCH_", "TRITON_", "CUBLAS", "CUDNN_", "DG_")
SHAPING_VARIABLES = frozenset(
    {"PYTHONPATH", "PYTHONHASHSEED", "PYTHONHOME", "LD_PRELOAD", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES"}
)
SHAPING_PREFIXES = ("NCCL_", "OMP_", "MKL_", "RL_KERNEL_OPS_")


def is_numerics_variable(name: str) -> bool:
    """Whether a mode sets ``name`` or a compared library reads it for its numerics or kernel choice."""
    return name in NUMERICS_VARIABLES or name.startswith(NUMERICS_PREFIXES)


def is_recorded(name: str) -> bool:
    """Whether a worker's ``name`` goes into the report (numerics or process-shaping)."""
    return is_numerics_variable(name) or name in SHAPING_VARIABLES or name.startswith(SHAPING_PREFIXES)


def worker_variables(
    base: Mapping[str, str], mode: Mode, inherit: Collection[str] = ()
) -> tuple[dict[str, str], dict[str, str]]:
    """(the whole environment of a worker running under ``mode``, what the report records of it).
    The worker gets ``base`` without its numerics variables (except those in ``inherit``), then the
    mode's own variables on top; the record is every numerics or process-shaping variable it has."""
    env = {k: v for k, v in base.items() if k in inherit or not is_numerics_variable(k)}
    env.update(mode.env)
    return env, {k: v for k, v in sorted(env.items()) if is_recorded(k)}
