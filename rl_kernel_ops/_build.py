"""Compile-on-first-use build of the CUDA half of ``rl_kernel_ops``.

Every ``csrc/*.cu`` file is one translation unit of a single torch extension. Each file registers
its own operators with ``TORCH_LIBRARY_FRAGMENT(rl_kernel_ops, m)``, so after ``load_extension()``
they are reachable as ``torch.ops.rl_kernel_ops.<name>``. The build is cached in a directory keyed
by torch version, CUDA version and GPU architecture; ninja recompiles only the sources that changed,
so there is one build per source change. Nothing here runs at import or ``pip install`` time.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

CSRC = Path(__file__).resolve().parent / "csrc"
EXTENSION_NAME = "rl_kernel_ops_cuda"


def _arch_flags(capability: tuple[int, int]) -> list[str]:
    """sm_90a always (Hopper-specific instructions), plus the running GPU's own architecture."""
    flags = ["-gencode=arch=compute_90a,code=sm_90a"]
    major, minor = capability
    if (major, minor) != (9, 0):
        flags.append(f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}")
    return flags


def build_directory(capability: tuple[int, int]) -> Path:
    """Where the objects and the shared library live: $RL_KERNEL_OPS_BUILD_DIR or ~/.cache."""
    import torch

    root = os.environ.get("RL_KERNEL_OPS_BUILD_DIR")
    base = Path(root) if root else Path.home() / ".cache" / "rl_kernel_ops"
    tag = f"torch{torch.__version__}-cuda{torch.version.cuda}-sm{capability[0]}{capability[1]}"
    return base / tag.replace("+", "_")


@functools.cache
def load_extension() -> None:
    """Build (first run only) and load the extension; afterwards torch.ops.rl_kernel_ops is populated.

    Raises RuntimeError when CUDA or nvcc is not available; the caller turns that into an
    "unavailable" reason.
    """
    import torch
    from torch.utils import cpp_extension

    if not torch.cuda.is_available():
        raise RuntimeError("rl_kernel_ops CUDA kernels need a CUDA device; none is visible")
    if cpp_extension.CUDA_HOME is None:
        raise RuntimeError("rl_kernel_ops CUDA kernels need nvcc; CUDA_HOME is not set and nvcc is not on PATH")
    capability = torch.cuda.get_device_capability()
    build_dir = build_directory(capability)
    build_dir.mkdir(parents=True, exist_ok=True)
    sources = sorted(str(p) for p in CSRC.glob("*.cu"))
    library = build_dir / f"{EXTENSION_NAME}.so"
    # torch adds no arch flags of its own when -gencode is already among the CUDA flags.
    # --exclude-libs keeps whatever the link takes from static archives private to the library: a
    # toolchain that links libstdc++ statically (the H200 machine's $CXX does) would otherwise
    # export a second copy of it, and a C++ check that formats a number would kill the process.
    kwargs = dict(
        name=EXTENSION_NAME,
        sources=sources,
        extra_cflags=["-O3", "-std=c++17"],
        extra_cuda_cflags=["-O3", "-std=c++17", "-lineinfo", *_arch_flags(capability)],
        extra_ldflags=["-Wl,--exclude-libs,ALL"],
        build_directory=str(build_dir),
        is_python_module=False,
        verbose=False,
    )
    if library.exists() and all(Path(s).stat().st_mtime <= library.stat().st_mtime for s in sources):
        cpp_extension.load(**kwargs)
        return
    from rich.console import Console

    with Console(stderr=True).status("compiling rl_kernel_ops (first run only)"):
        cpp_extension.load(**kwargs)
