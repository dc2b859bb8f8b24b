"""Megatron's batch-invariant mode (the ``megatron_*`` modes).

Two API shapes exist, told apart by ``inspect.signature``:
- megatron-core 0.19.2 (PyPI): ``enable_batch_invariant_mode()`` takes no argument; it registers
  Triton aten overrides (mm, addmm, _log_softmax, mean.dim), then imports Transformer Engine
  without a guard to patch it. It can provide the Triton variant only, and only where TE imports.
- Megatron-LM source trees (e.g. commit 52fbcbc): ``enable_batch_invariant_mode(backend=...)``,
  the backend (``te_native``, ``triton``, ...) checked by Megatron itself.
A mode the installed version cannot provide raises with the reason; overrides registered before
such a failure are removed again, so no half-enabled mode is left behind.

``AUDIT_MEGATRON_SRC`` names a Megatron-LM checkout to use instead of the installed package; it is
put first on ``sys.path`` before megatron is imported, and ``source_commit()`` gives its commit.
"""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

from audit.candidates import error_text, import_problem

SRC_ENV = "AUDIT_MEGATRON_SRC"
KERNELS = "megatron.core.transformer.custom_layers.batch_invariant_kernels"


def source_commit() -> str | None:
    """Short commit of the checkout named by $AUDIT_MEGATRON_SRC (None when unset or not git)."""
    src = os.environ.get(SRC_ENV)
    if not src:
        return None
    try:
        done = subprocess.run(["git", "-C", src, "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def kernels() -> ModuleType:
    """Megatron's batch-invariant kernels module, from $AUDIT_MEGATRON_SRC when set."""
    src = os.environ.get(SRC_ENV)
    if src:
        src = str(Path(src).resolve())
        if sys.path[:1] != [src]:
            sys.path.insert(0, src)
    problem = import_problem(KERNELS)
    if problem:
        raise ImportError(problem)
    module = importlib.import_module(KERNELS)
    if src and not Path(module.__file__).resolve().is_relative_to(src):
        raise ImportError(f"{KERNELS} was imported from {module.__file__}, not from {SRC_ENV}={src}")
    return module


def mode_problem(mode) -> str | None:
    """Why ``mode`` cannot be enabled here, found without enabling it: Megatron's kernels module
    must import (from the source tree when one is named) and its API must offer the variant."""
    try:
        module = kernels()
        kwargs = enable_arguments(module.enable_batch_invariant_mode, mode.variant, _describe())
    except ImportError as exc:
        return str(exc)
    except Exception as exc:
        return error_text(exc)
    if "backend" not in kwargs:  # this API imports Transformer Engine, unguarded, once enabled
        te = import_problem("transformer_engine.pytorch")
        if te:
            return f"{_describe()}: enable_batch_invariant_mode() imports Transformer Engine, and {te}"
    return None


def _describe() -> str:
    from megatron.core.package_info import __version__

    commit = source_commit()
    return f"Megatron source tree {commit} (megatron-core {__version__})" if os.environ.get(SRC_ENV) else f"megatron-core {__version__}"


def enable_arguments(enable, variant: str | None, where: str) -> dict[str, str]:
    """Keyword arguments selecting ``variant`` for this ``enable_batch_invariant_mode``; raises
    when its signature cannot express that variant."""
    if "backend" in inspect.signature(enable).parameters:
        return {"backend": variant}
    if variant == "triton":
        return {}
    raise RuntimeError(
        f"{where}: enable_batch_invariant_mode() takes no backend argument (Triton overrides only), "
        f"so the {variant} backend cannot be selected; it needs a Megatron with enable_batch_invariant_mode(backend=...)"
    )


def enable_mode(mode) -> str:
    module = kernels()
    where = _describe()
    kwargs = enable_arguments(module.enable_batch_invariant_mode, mode.variant, where)
    call = f"enable_batch_invariant_mode({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"
    try:
        module.enable_batch_invariant_mode(**kwargs)
    except Exception as exc:
        module.disable_batch_invariant_mode()
        raise RuntimeError(f"{where}: {call} failed: {error_text(exc)}") from exc
    return f"{where} {KERNELS}.{call} [{mode.name}]"


def disable_mode(mode) -> str:
    module = kernels()
    module.disable_batch_invariant_mode()
    return f"{_describe()} {KERNELS}.disable_batch_invariant_mode() [{mode.name}]"
