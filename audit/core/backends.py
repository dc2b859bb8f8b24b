"""What makes the provider's backward repeatable or not: the SDPA backend of the attention stage and
torch's deterministic algorithms.

Contract:
- ``ATTENTION`` are the names ``--attention`` accepts; ``auto`` leaves torch's own choice, the others
  pin one ``torch.nn.attention.SDPBackend`` through ``sdpa_kernel`` (``pinned``).
- ``problem(name)``: why ``name`` cannot be asked for with this torch (unknown, or an ``SDPBackend``
  this torch does not define), checked before anything runs.
- ``default_setting(device, backward)``: the setting used when ``--attention`` and
  ``--deterministic`` are not given. Without ``--backward``: ``auto``, not deterministic. With it:
  the fastest setting under which the provider's own backward repeats bit for bit on that device
  (``REPEATABLE_BACKWARD``). On the CPU that is ``auto`` without deterministic algorithms: the
  provider's gradients repeat bit for bit there (``tests/cli/test_chain_backward.py``). On CUDA it is
  ``flash`` with deterministic algorithms: measured on the H200 (``docs/evidence/h200/backward/``),
  no backend repeats without deterministic algorithms (``index_select``'s backward accumulates with
  atomics), every one that runs repeats with them (cuDNN does not run then), and flash is the fastest.
- ``observe(...)``: which backend torch actually ran for the attention stage's SDPA call at the
  chain's shapes (read from the profiler's aten op names, forward and with ``backward`` the
  backward), or why the pinned one cannot run there.
- ``DETERMINISTIC_VARIABLES``: what a worker's launch variables get with ``--deterministic``
  (recorded in ``mode_environment`` like every numerics variable).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, ContextManager

from audit.core.packages import error_text

if TYPE_CHECKING:
    import torch

AUTO = "auto"
SDPA_BACKENDS = {
    "math": "MATH",
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
}
ATTENTION = (AUTO, *SDPA_BACKENDS)
DETERMINISTIC_VARIABLES = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}

# the aten op each backend runs (CPU and CUDA spellings), as the profiler names them
_OPS = {
    "aten::_scaled_dot_product_attention_math": "math",
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash",
    "aten::_scaled_dot_product_efficient_attention": "efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
}


@dataclass(frozen=True)
class Setting:
    """An SDPA backend (``auto`` or one of ``SDPA_BACKENDS``) and whether deterministic algorithms are on."""

    attention: str
    deterministic: bool


# device type -> the fastest setting under which the provider's backward repeats bit for bit there
REPEATABLE_BACKWARD = {
    "cpu": Setting(AUTO, False),
    "cuda": Setting("flash", True),
}


def problem(name: str) -> str | None:
    """Why ``--attention name`` cannot be asked for with this torch (None when it can)."""
    if name not in ATTENTION:
        return f"unknown backend {name!r}; valid: {', '.join(ATTENTION)}"
    import torch
    from torch.nn.attention import SDPBackend

    if name != AUTO and not hasattr(SDPBackend, SDPA_BACKENDS[name]):
        return f"torch {torch.__version__} has no SDPA backend {SDPA_BACKENDS[name]}"
    return None


def default_setting(device_type: str, backward: bool) -> Setting:
    """The setting when none is given: ``auto`` without ``--backward``; with it, the device's entry
    in ``REPEATABLE_BACKWARD`` (the CUDA one for any other device type)."""
    if not backward:
        return Setting(AUTO, False)
    return REPEATABLE_BACKWARD.get(device_type, REPEATABLE_BACKWARD["cuda"])


def pinned(name: str) -> ContextManager:
    """SDPA restricted to backend ``name`` (``auto``: torch's own choice)."""
    if name == AUTO:
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, SDPA_BACKENDS[name])])


def unpinned() -> ContextManager:
    """Every SDPA backend allowed again (the FP64 chain runs here: only ``math`` takes FP64)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, b) for b in SDPA_BACKENDS.values() if hasattr(SDPBackend, b)])


def observe(
    name: str, *, heads: int, head_dim: int, length: int, device: torch.device, backward: bool
) -> dict[str, str]:
    """``{"ran": backend}``: the backend torch ran for diffusers' native SDPA call of the attention
    stage (BF16, (1, heads, length, head_dim), no mask, not causal) under ``pinned(name)``, read from
    the profiler (``"a, b"`` when forward and backward ran different ones); or ``{"unavailable":
    reason}`` when that call raises (a backend the device cannot run at these shapes)."""
    import torch

    q, k, v = (
        torch.randn(1, heads, length, head_dim, dtype=torch.bfloat16, device=device).requires_grad_(backward)
        for _ in range(3)
    )
    try:
        with pinned(name), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            with torch.set_grad_enabled(backward):
                out = torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=False)
                if backward:
                    out.sum().backward()
    except RuntimeError as exc:
        return {"unavailable": f"--attention {name} cannot run here at length {length}: {error_text(exc)}"}
    seen = list(dict.fromkeys(_OPS[e.key] for e in prof.key_averages() if e.key in _OPS))
    return {"ran": ", ".join(seen) if seen else "none seen by the profiler"}


def switch_on(
    setting: Setting, *, heads: int, head_dim: int, lengths: list[int], device: torch.device, backward: bool
) -> dict[str, str]:
    """In a worker (whose launch variables hold ``DETERMINISTIC_VARIABLES`` when ``setting`` is
    deterministic): turn torch's deterministic algorithms on if asked, then ``observe`` the pinned
    backend at every length. ``{"ran": backends}`` or the first length's ``{"unavailable": reason}``."""
    import torch

    if setting.deterministic:
        torch.use_deterministic_algorithms(True)
    ran = []
    for length in lengths:
        seen = observe(
            setting.attention, heads=heads, head_dim=head_dim, length=length, device=device, backward=backward
        )
        if "unavailable" in seen:
            return seen
        ran.append(seen["ran"])
    return {"ran": "; ".join(dict.fromkeys(ran))}
