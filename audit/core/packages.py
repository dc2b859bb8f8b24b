"""What is installed, why a module cannot be imported, and errors as bounded one-paragraph reasons.

A leaf: it imports nothing of this project and no torch, so modes, adapters, the probe of another
interpreter and the report commands can all use it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from pathlib import Path

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
)  # the distributions whose versions every report records


def version(distribution: str) -> str | None:
    """Installed version of a distribution, or None."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


REASON_CHARS = 4096  # an unavailable reason keeps at most this many characters of what failed


def bounded(text: str, limit: int = REASON_CHARS) -> str:
    """``text`` when it has at most ``limit`` characters; otherwise a note that it was cut, then its
    last ``limit`` characters (the end of an error says most)."""
    if len(text) <= limit:
        return text
    return f"[cut to its last {limit:,} characters] ...{text[-limit:]}"


def error_text(exc: BaseException) -> str:
    """An exception as an unavailable reason: ``Type: message``, bounded."""
    return bounded(f"{type(exc).__name__}: {exc}".strip())


def import_problem(module: str) -> str | None:
    """Why ``module`` cannot be imported here (None when it imports)."""
    top = module.split(".")[0]
    if importlib.util.find_spec(top) is None:
        return f"{top} is not installed"
    try:
        importlib.import_module(module)
    except Exception as exc:  # any failure to import makes the candidate unavailable, with the text
        return f"import {module} failed: {error_text(exc)}"
    return None


def shipped_module(modules: tuple[str, ...]) -> str:
    """The first of ``modules`` (all in one top-level package) whose source file the installed
    package ships, found without importing anything; the first of them when none is found."""
    spec = importlib.util.find_spec(modules[0].split(".")[0])
    roots = spec.submodule_search_locations if spec and spec.submodule_search_locations else ()
    for module in modules:
        rel = Path(*module.split(".")[1:]).with_suffix(".py")
        if any((Path(root) / rel).is_file() for root in roots):
            return module
    return modules[0]
