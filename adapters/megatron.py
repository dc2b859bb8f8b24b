"""Megatron's batch-invariant mode (the ``megatron_*`` modes) and its batch-invariant RMSNorm.

Two API shapes exist, told apart by ``inspect.signature``:
- megatron-core 0.19.2 (PyPI): ``enable_batch_invariant_mode()`` takes no argument and registers
  Triton aten overrides (mm, addmm, _log_softmax, mean.dim): the Triton variant only.
- Megatron-LM source trees since 57deb43: ``enable_batch_invariant_mode(backend=...)``, accepting
  the names in the module's ``_BATCH_INVARIANT_BACKENDS`` (``deepgemm`` and ``triton``; d98e8a6
  added ``te_native``); ``deepgemm`` also needs the module's ``HAVE_DEEPGEMM_BF16``.
Each mode's variant is checked against what the installed module offers before anything is
called, so ``audit list`` and the mode process agree. Every shape patches Transformer Engine once
enabled, importing it without a guard, so Transformer Engine must import for every mode. A mode
that fails anyway raises with the reason; overrides registered before such a failure are removed
again, so no half-enabled mode is left behind.

Candidate ``megatron_bi_rmsnorm`` (norm_modulate): ``rmsnorm_batch_invariant(x, w, eps)`` from the
same module (present in megatron-core 0.19.2; needs Triton and CUDA tensors, not Transformer
Engine), modulated with ``index_select`` like the references. It is an autograd function: FP32
math, the mean of squares through Megatron's batch-invariant Triton ``mean_dim``, and its own
backward giving dx and dw, so all four gradients are compared.

``AUDIT_MEGATRON_SRC`` names a Megatron-LM checkout to use instead of the installed package; it is
put first on ``sys.path`` when this module is imported (so the candidate's import check finds the
tree too) and before megatron is imported for a mode, and ``source_commit()`` gives its commit.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from pathlib import Path
from types import ModuleType

import torch

from adapters.diffusers import modulate
from audit.core.candidates import candidate
from audit.core.packages import error_text, import_problem
from audit.core.ops import EPS
from audit.parent.provenance import short_commit

SRC_ENV = "AUDIT_MEGATRON_SRC"
KERNELS = "megatron.core.transformer.custom_layers.batch_invariant_kernels"


def source_commit() -> str | None:
    """Short commit of the checkout named by $AUDIT_MEGATRON_SRC (None when unset or not git)."""
    src = os.environ.get(SRC_ENV)
    return short_commit(Path(src)) if src else None


def _source_tree() -> str | None:
    """$AUDIT_MEGATRON_SRC resolved and first on ``sys.path``; None when unset."""
    src = os.environ.get(SRC_ENV)
    if not src:
        return None
    src = str(Path(src).resolve())
    if sys.path[:1] != [src]:
        sys.path.insert(0, src)
    return src


_source_tree()


def kernels() -> ModuleType:
    """Megatron's batch-invariant kernels module, from $AUDIT_MEGATRON_SRC when set."""
    src = _source_tree()
    problem = import_problem(KERNELS)
    if problem:
        raise ImportError(problem)
    module = importlib.import_module(KERNELS)
    if src and not Path(module.__file__).resolve().is_relative_to(src):
        raise ImportError(f"{KERNELS} was imported from {module.__file__}, not from {SRC_ENV}={src}")
    return module


def mode_problem(mode) -> str | None:
    """Why ``mode`` cannot be enabled here, found without enabling it: Megatron's kernels module
    must import (from the source tree when one is named), offer the mode's variant, and
    Transformer Engine, which enabling imports, must import too."""
    try:
        module = kernels()
        where = _describe()
        kwargs = enable_arguments(module, mode.variant, where)
    except ImportError as exc:
        return str(exc)
    except Exception as exc:
        return error_text(exc)
    te = import_problem("transformer_engine.pytorch")
    if te:
        return f"{where}: {_call(kwargs)} imports Transformer Engine, and {te}"
    return None


def _describe() -> str:
    from megatron.core.package_info import __version__

    commit = source_commit()
    return (
        f"Megatron source tree {commit} (megatron-core {__version__})"
        if os.environ.get(SRC_ENV)
        else f"megatron-core {__version__}"
    )


def _takes_backend(module: ModuleType) -> bool:
    return "backend" in inspect.signature(module.enable_batch_invariant_mode).parameters


def enable_arguments(module: ModuleType, variant: str | None, where: str) -> dict[str, str]:
    """Keyword arguments selecting ``variant`` for this module's ``enable_batch_invariant_mode``;
    raises, without calling anything, when the module does not offer that variant: a name outside
    its ``_BATCH_INVARIANT_BACKENDS``, ``deepgemm`` without ``HAVE_DEEPGEMM_BF16``, or anything but
    Triton for the API without a backend argument."""
    if not _takes_backend(module):
        if variant == "triton":
            return {}
        raise RuntimeError(
            f"{where}: enable_batch_invariant_mode() takes no backend argument (Triton overrides only), "
            f"so the {variant} backend cannot be selected; "
            "it needs a Megatron with enable_batch_invariant_mode(backend=...)"
        )
    offered = tuple(module._BATCH_INVARIANT_BACKENDS)
    if variant not in offered:
        raise RuntimeError(
            f"{where}: enable_batch_invariant_mode(backend=...) offers {', '.join(offered)} "
            f"(_BATCH_INVARIANT_BACKENDS), not {variant}"
        )
    if variant == "deepgemm" and not module.HAVE_DEEPGEMM_BF16:
        raise RuntimeError(
            f"{where}: the deepgemm backend needs DeepGEMM with bf16 bindings (HAVE_DEEPGEMM_BF16 is False)"
        )
    return {"backend": variant}


def _call(kwargs: dict[str, str]) -> str:
    return f"enable_batch_invariant_mode({', '.join(f'{k}={v!r}' for k, v in kwargs.items())})"


def enable_mode(mode) -> str:
    module = kernels()
    where = _describe()
    kwargs = enable_arguments(module, mode.variant, where)
    try:
        module.enable_batch_invariant_mode(**kwargs)
    except Exception as exc:
        module.disable_batch_invariant_mode()
        raise RuntimeError(f"{where}: {_call(kwargs)} failed: {error_text(exc)}") from exc
    return f"{where} {KERNELS}.{_call(kwargs)} [{mode.name}]"


def dispatch(mode) -> str:
    """The backend this process's mode asked Megatron for (the arguments ``enable_mode`` passed,
    decided from what the installed module offers) and the module's DeepGEMM BF16 flag
    (``audit.core.dispatch`` records it)."""
    module = kernels()
    kwargs = enable_arguments(module, mode.variant, _describe())
    return f"{_call(kwargs)}; HAVE_DEEPGEMM_BF16={getattr(module, 'HAVE_DEEPGEMM_BF16', 'absent')}"


def disable_mode(mode) -> str:
    module = kernels()
    module.disable_batch_invariant_mode()
    return f"{_describe()} {KERNELS}.disable_batch_invariant_mode() [{mode.name}]"


@candidate(
    "megatron_bi_rmsnorm",
    ops=("norm_modulate",),
    source=lambda mode, device: f"{_describe()} {KERNELS}.rmsnorm_batch_invariant + index_select",
    grads=("x", "w", "sh", "sc"),
    requires=(KERNELS,),
    cuda_only=True,
)
def megatron_bi_rmsnorm(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return modulate(importlib.import_module(KERNELS).rmsnorm_batch_invariant(t["x"], t["w"], EPS), t)
