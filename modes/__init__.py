"""The process-wide modes: batch-invariant and numerics switches of vLLM, SGLang and Megatron.

A mode is a switch a library flips for a whole process: it patches torch's aten ops or relies on
cuBLAS variables read once at start-up. Each mode therefore runs in its own subprocess, whose
environment gets ``env`` before torch starts; the worker then calls ``enable`` (a
``"module:function"`` path taking the Mode and returning a description of what it switched on, or
raising when the installed library cannot provide the mode). ``disable`` (same form) switches it
off again where the library offers that; the FP64 references of the prior-art report need it.

A mode with ``ops`` is no library switch but the process environment a few candidates need (a
library that reads a variable once per process); only those candidates, which name the mode, run
in it.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass, field
from typing import Protocol


class _Op(Protocol):
    name: str
    kind: str  # "row" or "gemm"


@dataclass(frozen=True)
class Slot:
    """A mode as selected: ``MODE``, or ``MODE@ENV``, the same mode run again, in its own process,
    in the named Python environment ENV. ``str(Slot.parse(text)) == text`` for every valid text."""

    mode: str
    environment: str | None = None

    @classmethod
    def parse(cls, text: str) -> Slot:
        """KeyError on ``MODE@`` (no environment after ``@``); the mode name itself is not checked."""
        mode, at, env = text.partition("@")
        if at and not env:
            raise KeyError(f"mode {text!r}: no environment after '@'")
        return cls(mode, env or None)

    def __str__(self) -> str:
        return f"{self.mode}@{self.environment}" if self.environment else self.mode


@dataclass(frozen=True)
class Mode:
    name: str
    summary: str
    env: dict[str, str] = field(default_factory=dict)
    library: str | None = None  # distribution that provides the mode
    enable: str | None = None
    disable: str | None = None
    variant: str | None = None  # library-specific flavour, e.g. Megatron's backend
    requires: tuple[str, ...] = ()  # modules that must import for the mode to be possible
    ops: tuple[str, ...] | None = None  # None: a library mode, run by every GEMM op; otherwise the
    # process environment of candidates of these ops that name this mode
    environment: str | None = None  # set on "MODE@ENV": the same mode run again in a named environment

    @property
    def base(self) -> str:
        """The mode's own name, without ``@ENV``."""
        return Slot.parse(self.name).mode

    def runs(self, op: _Op) -> bool:
        """Whether ``op`` runs in this mode: GEMM ops in plain and every library mode, row ops in
        plain mode only; a mode made for some candidates (``ops`` set) runs just those ops."""
        if self.ops is not None:
            return op.name in self.ops
        return op.kind == "gemm" or self.base == "plain"

    def call(self, which: str) -> str | None:
        """Run ``enable`` or ``disable``; returns its description (None when the mode has none)."""
        path = getattr(self, which)
        if path is None:
            return None
        module, _, function = path.partition(":")
        return getattr(importlib.import_module(module), function)(self)


_IEEE = {"TRITON_F32_DEFAULT": "ieee"}
# SGLang sends bf16 mm to DeepGEMM on sm_90+ when deep_gemm imports, unless this is "0" (read at import)
SGLANG_DEEPGEMM = "SGLANG_BATCH_INVARIANT_OPS_ENABLE_MM_DEEPGEMM"
_SGLANG = dict(library="sglang", enable="adapters.sglang:enable_mode", disable="adapters.sglang:disable_mode")
_MEGATRON = dict(
    library="megatron-core", enable="adapters.megatron:enable_mode", disable="adapters.megatron:disable_mode"
)

MODES: dict[str, Mode] = {
    m.name: m
    for m in (
        Mode("plain", "nothing switched on"),
        Mode(
            "vllm",
            "vLLM batch-invariant mode (cuBLAS kept for matmul on sm_90+, mean/softmax/bmm overridden)",
            env={"CUBLAS_WORKSPACE_CONFIG": ":16:8", "CUBLASLT_WORKSPACE_SIZE": "1"},
            library="vllm",
            enable="adapters.vllm:enable_mode",
        ),
        Mode(
            "sglang",
            "SGLang batch-invariant ops (Triton persistent matmul, mean, log_softmax)",
            env={SGLANG_DEEPGEMM: "0"},
            **_SGLANG,
        ),
        Mode(
            "sglang_ieee",
            "SGLang batch-invariant ops with Triton's FP32 dot in IEEE",
            env={SGLANG_DEEPGEMM: "0", **_IEEE},
            **_SGLANG,
        ),
        Mode(
            "sglang_deepgemm",
            "SGLang batch-invariant ops as SGLang ships them: bf16 mm through DeepGEMM where SGLang routes it "
            "there, else its silent fallback, Triton (the dispatch decision says which)",
            env={SGLANG_DEEPGEMM: "1"},
            **_SGLANG,
        ),
        Mode(
            "megatron_te_native",
            "Megatron batch-invariant mode, TE-native backend",
            env={"CUBLASLT_WORKSPACE_SIZE": "0"},
            variant="te_native",
            **_MEGATRON,
        ),
        Mode("megatron_deepgemm", "Megatron batch-invariant mode, DeepGEMM backend", variant="deepgemm", **_MEGATRON),
        Mode("megatron_triton", "Megatron batch-invariant mode, Triton backend", variant="triton", **_MEGATRON),
        Mode(
            "megatron_triton_ieee",
            "Megatron batch-invariant mode, Triton backend, IEEE FP32 dot",
            env=dict(_IEEE),
            variant="triton",
            **_MEGATRON,
        ),
        Mode(
            "te_cudnn",
            "Transformer Engine's normalization through cuDNN (read once per process), for transformer_engine_cudnn",
            env={"NVTE_NORM_FWD_USE_CUDNN": "1", "NVTE_NORM_BWD_USE_CUDNN": "1"},
            library="transformer_engine",
            requires=("transformer_engine.pytorch",),
            ops=("norm_modulate",),
        ),
    )
}


def get_mode(name: str) -> Mode:
    """The mode called ``name``; ``MODE@ENV`` is that mode run again in the named environment ENV
    (its own process, its candidates reported with ``@ENV``; see ``audit.parent.interpreters``)."""
    slot = Slot.parse(name)
    try:
        mode = MODES[slot.mode]
    except KeyError:
        raise KeyError(f"unknown mode {slot.mode!r}; valid modes: {', '.join(MODES)}") from None
    if slot.environment is None:
        return mode
    return dataclasses.replace(mode, name=name, environment=slot.environment)
