"""Compile-on-first-use build of the CUDA half of ``rl_kernel_ops``.

Every ``csrc/*.cu`` file is one translation unit of a single torch extension. Each file registers
its own operators with ``TORCH_LIBRARY_FRAGMENT(rl_kernel_ops, m)``, so after ``load_extension()``
they are reachable as ``torch.ops.rl_kernel_ops.<name>``. The build is cached in a directory keyed
by torch version, CUDA version and GPU architecture, beside a stamp: the sha256 of every file in
``csrc`` and of the compile flags. The library loaded is always a build of the sources as they are:
where the stamp differs, the directory's objects and library are removed and everything is compiled
again, because ninja compares modification times, and a checkout or a copy of the tree can give a
changed source an older time than the build. Nothing here runs at import or ``pip install`` time.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

CSRC = Path(__file__).resolve().parent / "csrc"
EXTENSION_NAME = "rl_kernel_ops_cuda"
STAMP_NAME = "sources.sha256"


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


def sources_digest(flags: list[str]) -> str:
    """sha256 of every file in ``csrc`` (its name and its bytes, in name order) and of ``flags``:
    equal digests mean the same sources compiled the same way, whatever the files' times."""
    digest = hashlib.sha256()
    for path in sorted(CSRC.iterdir()):
        if path.is_file():
            digest.update(f"{path.name}\0{path.stat().st_size}\0".encode())
            digest.update(path.read_bytes())
    digest.update("\0".join(flags).encode())
    return digest.hexdigest()


def holds_build_of(build_dir: Path, digest: str) -> bool:
    """Whether ``build_dir`` holds the library of the sources whose digest is ``digest``. Where it
    does not, the objects and library of another build are removed, so that the next build
    compiles every source again."""
    stamp = build_dir / STAMP_NAME
    if (build_dir / f"{EXTENSION_NAME}.so").exists() and stamp.exists() and stamp.read_text() == digest:
        return True
    for path in (*build_dir.glob("*.o"), *build_dir.glob("*.so"), stamp):
        path.unlink(missing_ok=True)
    return False


@functools.cache
def load_extension() -> None:
    """Build (where the sources changed since the last build) and load the extension; afterwards
    torch.ops.rl_kernel_ops is populated.

    Raises RuntimeError when CUDA or nvcc is not available; the caller turns that into an
    "unavailable" reason.
    """
    import fcntl

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
    digest = sources_digest([*kwargs["extra_cflags"], *kwargs["extra_cuda_cflags"], *kwargs["extra_ldflags"]])
    # One process at a time checks, builds and stamps: the others wait, then load its build.
    with open(build_dir / "rl_kernel_ops.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if holds_build_of(build_dir, digest):
            cpp_extension.load(**kwargs)
            return
        from rich.console import Console

        with Console(stderr=True).status("compiling rl_kernel_ops (first run after a change of its sources)"):
            cpp_extension.load(**kwargs)
        (build_dir / STAMP_NAME).write_text(digest)
