"""The report's ``environment`` block and the repository state (commit, tracked files changed)."""

from __future__ import annotations

import platform
import subprocess
import sys
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


def interpreter() -> dict:
    """This interpreter: its path, Python, torch and CUDA versions, and the compared libraries'
    versions it sees (a mode's worker reports this, so the report says what each mode really ran)."""
    return {
        "python": sys.executable,
        "python_version": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "libraries": {name: version(name) for name in LIBRARIES},
    }


def collect(
    device: torch.device,
    mode_environment: dict[str, dict[str, str]],
    tf32: bool,
    interpreters: dict[str, dict] | None = None,
) -> dict:
    """What ran where: GPU and capability (null on a CPU device), versions, TF32 state, and per mode
    the numerics variables its process had. ``tf32`` is what the mode processes ran with. The
    top-level versions are the audit's own process's; ``interpreters`` (what each mode's worker
    reported, or why its environment could not run one) becomes ``modes`` when a mode ran in
    another environment."""
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
        **(
            {"modes": interpreters} if interpreters and any(i.get("environment") for i in interpreters.values()) else {}
        ),
    }
