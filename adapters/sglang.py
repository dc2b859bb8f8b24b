"""SGLang: its fused norm-scale-shift kernel (CuTe DSL) as a norm_modulate candidate, and its
batch-invariant ops as the ``sglang`` / ``sglang_ieee`` modes.

Candidate ``sglang``: ``fused_norm_scale_shift(x, w, None, scale, shift, "rms", eps)`` with x as
(1, S, H) and scale/shift as (1, S, H) per-token rows gathered with ``index_select`` (the kernel
takes [1], [D], [1|B, D], [1|B, 1|S, D] or [B, F, 1, D]). Forward only: SGLang gives it no backward,
so only its output is compared. It needs H % 256 == 0 and H <= 8192 (one CTA of H / 256 warps per
row). Expected: each row is computed by one CTA alone, so the output cannot depend on the other
rows; it keeps ``x * rstd * w`` in FP32 and rounds once before the FP32 modulation, so bitwise
equality with eager is not expected.

Modes: ``sglang.srt.batch_invariant_ops.enable_batch_invariant_mode()`` registers aten overrides
(mm, addmm, bmm, _log_softmax, mean.dim) for the whole process; ``disable_batch_invariant_mode()``
removes them.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path

import torch

from audit.candidates import candidate, import_problem, version
from audit.ops import EPS

# where fused_norm_scale_shift lives: 0.5.10, then the later layout
_KERNEL_MODULES = (
    "sglang.jit_kernel.diffusion.cutedsl.scale_residual_norm_scale_shift",
    "sglang.kernels.ops.diffusion.norm.scale_residual_norm_cutedsl",
)
_MODE_MODULE = "sglang.srt.batch_invariant_ops"


def kernel_module() -> str:
    """The kernel module the installed sglang ships (found by file, without importing sglang,
    whose package import is heavy); the 0.5.10 path when sglang or both files are missing."""
    spec = importlib.util.find_spec("sglang")
    for module in _KERNEL_MODULES if spec and spec.submodule_search_locations else ():
        rel = Path(*module.split(".")[1:]).with_suffix(".py")
        if any((Path(root) / rel).is_file() for root in spec.submodule_search_locations):
            return module
    return _KERNEL_MODULES[0]


_KERNEL = kernel_module()


@candidate(
    "sglang",
    ops=("norm_modulate",),
    source=lambda mode, device: f"SGLang {version('sglang')} fused_norm_scale_shift (CuTe DSL, {_KERNEL}; forward only)",
    grads=(),
    requires=(_KERNEL,),
    cuda_only=True,
)
def sglang(t: dict[str, torch.Tensor]) -> torch.Tensor:
    x, idx = t["x"], t["idx"]
    if x.shape[-1] % 256:
        raise ValueError(f"SGLang's fused_norm_scale_shift needs H % 256 == 0; H = {x.shape[-1]}")
    fused_norm_scale_shift = importlib.import_module(_KERNEL).fused_norm_scale_shift
    with torch.no_grad():
        scale = t["sc"].index_select(0, idx).unsqueeze(0)
        shift = t["sh"].index_select(0, idx).unsqueeze(0)
        return fused_norm_scale_shift(x.unsqueeze(0), t["w"], None, scale, shift, "rms", EPS).squeeze(0)


def _matmul_backend() -> str:
    impl = importlib.import_module(f"{_MODE_MODULE}.batch_invariant_ops")
    deepgemm = getattr(impl, "ENABLE_JIT_DEEPGEMM", False) and getattr(impl, "_ENABLE_MM_DEEPGEMM", False)
    return "DeepGEMM bf16 (Triton persistent matmul otherwise)" if deepgemm else "Triton persistent matmul"


def _mode_module():
    problem = import_problem(_MODE_MODULE)
    if problem:
        raise ImportError(problem)
    return importlib.import_module(_MODE_MODULE)


def enable_mode(mode) -> str:
    """Switch SGLang's batch-invariant ops on for this process; returns what was switched on."""
    ops = _mode_module()
    ops.enable_batch_invariant_mode()
    dot = os.environ.get("TRITON_F32_DEFAULT", "tf32 (Triton default)")
    return (
        f"SGLang {version('sglang')} {_MODE_MODULE}.enable_batch_invariant_mode(): aten mm/addmm/bmm via "
        f"{_matmul_backend()}, _log_softmax and mean.dim overridden; FP32 dot {dot} [{mode.name}]"
    )


def disable_mode(mode) -> str:
    _mode_module().disable_batch_invariant_mode()
    return f"SGLang {version('sglang')} {_MODE_MODULE}.disable_batch_invariant_mode() [{mode.name}]"
