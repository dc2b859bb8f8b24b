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
    "vllm-omni",  # its MiniMax-H3 kernels
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


# module -> why its first import failed. A failed import can leave part of its package imported, so a
# second attempt may fail elsewhere or seem to succeed: the first answer is the one that holds.
_FAILED_IMPORTS: dict[str, str] = {}


def import_problem(requirement: str) -> str | None:
    """Why ``requirement`` cannot be used here (None when it can): a module that must import, or
    ``module:name``, a module that must import and provide ``name`` (a lazy export is resolved, so
    what it imports must import too). Where the installed package lacks the module or the name, the
    reason says so with its version: ``sglang 0.5.10.post1 has no sglang.kernels.ops.diffusion.
    indexed_gate_bf16``; any other failure is ``import MODULE failed: Type: message``."""
    module, _, name = requirement.partition(":")
    top = module.split(".")[0]
    if importlib.util.find_spec(top) is None:
        return f"{top} is not installed"
    lacks = f"{top} {version(top) or '(version unknown)'} has no {module}{'.' + name if name else ''}"
    if module in _FAILED_IMPORTS:
        return _FAILED_IMPORTS[module]
    try:
        imported = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing.startswith(f"{top}.") and f"{module}.".startswith(f"{missing}."):
            return _FAILED_IMPORTS.setdefault(module, lacks)
        return _FAILED_IMPORTS.setdefault(module, f"import {module} failed: {error_text(exc)}")
    except Exception as exc:  # any failure to import makes the candidate unavailable, with the text
        return _FAILED_IMPORTS.setdefault(module, f"import {module} failed: {error_text(exc)}")
    if not name:
        return None
    if name not in dir(imported):
        return lacks
    try:
        getattr(imported, name)
    except Exception as exc:  # a lazy export whose own import fails
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
