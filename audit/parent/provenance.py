"""The report's ``environment`` block and the repository state (commit, tracked files changed)."""

from __future__ import annotations

import platform
from pathlib import Path

import torch

from audit.core.packages import LIBRARIES, version
from audit.parent.launch import REPO, ask

GIT_TIMEOUT_S = 20.0


def git(*args: str, tree: Path = REPO) -> str | None:
    """``git -C TREE ARGS``'s output, stripped; None when git is missing, fails or hangs."""
    try:
        code, out, _ = ask(["git", "-C", str(tree), *args], timeout=GIT_TIMEOUT_S)
    except OSError:
        return None
    return out.strip() if code == 0 else None


def short_commit(tree: Path) -> str | None:
    """The 7-character commit of the checkout at ``tree`` (None when it is none)."""
    return git("rev-parse", "--short=7", "HEAD", tree=tree) or None


def repository_state() -> tuple[str, bool | str]:
    """(HEAD commit, whether tracked files differ from it) of the checkout holding rl_kernel_ops;
    ("unknown", "unknown") outside a git checkout."""
    head = git("rev-parse", "HEAD")
    if head is None:
        return "unknown", "unknown"
    status = git("status", "--porcelain", "--untracked-files=no")
    return head, ("unknown" if status is None else bool(status))


def collect(
    device: torch.device,
    mode_environment: dict[str, dict[str, str]],
    tf32: bool,
    interpreters: dict[str, dict] | None = None,
    dispatch: dict[str, dict] | None = None,
) -> dict:
    """What ran where: GPU and capability (null on a CPU device), versions, TF32 state, and per mode
    the numerics variables its process had. ``tf32`` is what the mode processes ran with. The
    top-level versions are the audit's own process's; ``interpreters`` (what each mode's worker
    reported, or why its environment could not run one) becomes ``modes`` when a mode ran in
    another environment; ``dispatch`` is each mode's dispatch switches as its worker read them."""
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
        **({"dispatch": dispatch} if dispatch else {}),
        **(
            {"modes": interpreters} if interpreters and any(i.get("environment") for i in interpreters.values()) else {}
        ),
    }
