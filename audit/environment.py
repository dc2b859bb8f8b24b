"""The report's ``environment`` block and the repository state (SPEC.md section 6)."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

import torch

from .candidates import version

LIBRARIES = (
    "torch",
    "triton",
    "diffusers",
    "vllm",
    "flashinfer-python",
    "sglang",
    "nvidia-cutlass-dsl",  # SGLang's CuTe-DSL kernels
    "deep_gemm",  # the sglang_deepgemm and megatron_deepgemm modes
    "liger-kernel",
    "transformer_engine",
    "megatron-core",
)
REPO = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def repository_state() -> tuple[str, bool | str]:
    """(HEAD commit, whether tracked files differ from it) of the checkout holding rl_kernel_ops;
    ("unknown", "unknown") outside a git checkout."""
    head = _git("rev-parse", "HEAD")
    if head is None:
        return "unknown", "unknown"
    status = _git("status", "--porcelain", "--untracked-files=no")
    return head, ("unknown" if status is None else bool(status))


def collect(device: torch.device, mode_environment: dict[str, dict[str, str]], tf32: bool) -> dict:
    """What ran where: GPU and capability (null on a CPU device), versions, TF32 state, and per mode
    the numerics variables its process had. ``tf32`` is what the mode processes ran with."""
    gpu = capability = None
    if device.type == "cuda":
        gpu = torch.cuda.get_device_name(device)
        capability = list(torch.cuda.get_device_capability(device))
    return {
        "gpu": gpu,
        "capability": capability,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "tf32": tf32,
        "libraries": {name: version(name) for name in LIBRARIES},
        "mode_environment": mode_environment,
    }
