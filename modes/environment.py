"""The environment a mode's process gets, and what of it the report records.

The invoking shell's variables must not change a mode's numerics unrecorded. So every variable
that some mode sets, or that the libraries read for their numerics, is removed before a mode's own
variables are applied; a variable named with ``--inherit-env`` is kept on purpose. The report's
``mode_environment`` then lists, per mode, exactly those of the process's variables.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from . import MODES, Mode

NUMERICS_VARIABLES = frozenset(
    {
        "TRITON_F32_DEFAULT",
        "CUBLAS_WORKSPACE_CONFIG",
        "CUBLASLT_WORKSPACE_SIZE",
        "NVIDIA_TF32_OVERRIDE",
        "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    }
    | {name for m in MODES.values() for name in m.env}
)
NUMERICS_PREFIXES = ("NVTE_", "VLLM_", "SGLANG_")


def is_numerics_variable(name: str) -> bool:
    """Whether a mode sets ``name`` or a compared library reads it for its numerics."""
    return name in NUMERICS_VARIABLES or name.startswith(NUMERICS_PREFIXES)


def mode_environment(
    base: Mapping[str, str], mode: Mode, inherit: Collection[str] = ()
) -> tuple[dict[str, str], dict[str, str]]:
    """(the environment for ``mode``'s process, what the report records of it). The process gets
    ``base`` without its numerics variables (except those named in ``inherit``), then the mode's
    own variables on top; the record is every numerics or inherited variable the process has."""
    env = {k: v for k, v in base.items() if k in inherit or not is_numerics_variable(k)}
    env.update(mode.env)
    return env, {k: v for k, v in sorted(env.items()) if k in inherit or is_numerics_variable(k)}
