"""The candidate registry: every implementation registers itself beside its function.

A candidate declares its report name, the op it serves, how its ``source`` string is built, which
of the op's inputs it differentiates, what it must import, whether it needs CUDA, and whether it
runs in every mode (reported as ``name[mode]``) or in one mode only (plain, unless it names the
mode whose process environment it needs). Its function maps the op's
input tensors (leaves, ``requires_grad`` set on the inputs it differentiates) to its output(s);
the runner does the backward pass with the case's fixed upstream gradient.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

Forward = Callable[[dict[str, torch.Tensor]], "torch.Tensor | tuple[torch.Tensor, ...]"]
ADAPTER_MODULES = (
    "adapters.diffusers",
    "adapters.pytorch",
    "adapters.rl_kernel",
    "adapters.liger",
    "adapters.megatron",
    "adapters.sglang",
    "adapters.transformer_engine",
    "adapters.vllm",
)
PLUGINS_ENV = "AUDIT_PLUGINS"  # comma-separated extra modules that register candidates


@dataclass(frozen=True)
class Candidate:
    name: str
    op: str
    forward: Forward = field(repr=False)
    source: Callable[[str, torch.device], str] = field(repr=False)  # (mode, device) -> what ran
    grads: tuple[str, ...] | None = None  # None: every gradient the op defines
    requires: tuple[str, ...] = ()  # importable modules, checked before the candidate runs
    cuda_only: bool = False
    min_capability: tuple[int, int] | None = None
    all_modes: bool = False  # runs under every mode as name[mode]; otherwise in ``mode`` only
    mode: str = "plain"  # the one mode a candidate that is not all_modes runs in
    computes: str | None = None  # candidate whose computation this one implements, evaluated in
    # FP64 as its accuracy reference; None: the op's first reference (diffusers)

    def report_name(self, mode: str) -> str:
        """``name[MODE]`` for a candidate of every mode; otherwise ``name``, or ``name@ENV`` when
        its mode runs again in environment ENV (mode ``MODE@ENV``)."""
        if self.all_modes:
            return f"{self.name}[{mode}]"
        env = mode.partition("@")[2]
        return f"{self.name}@{env}" if env else self.name

    def runs_in(self, mode: str) -> bool:
        return self.all_modes or mode.partition("@")[0] == self.mode


_REGISTRY: dict[tuple[str, str], Candidate] = {}


def candidate(name: str, *, ops: tuple[str, ...], source: str | Callable[[str, torch.device], str], **meta):
    """Register the decorated forward function as candidate ``name`` for each op in ``ops``.

    ``source`` is a string (``{mode}`` is filled in) or a callable ``(mode, device) -> str``.
    """

    def register(fn: Forward) -> Forward:
        src = source if callable(source) else (lambda mode, device, _s=source: _s.format(mode=mode))
        for op in ops:
            key = (op, name)
            if key in _REGISTRY:
                raise ValueError(f"candidate {name!r} registered twice for op {op!r}")
            _REGISTRY[key] = Candidate(name=name, op=op, forward=fn, source=src, **meta)
        return fn

    return register


class PluginError(ImportError):
    """A module named in $AUDIT_PLUGINS cannot be imported; the message names it and says why."""


def load_adapters() -> None:
    """Import every adapter module, then the plugins named in $AUDIT_PLUGINS, so they register.
    A plugin that fails to import (or to register) raises PluginError naming it."""
    for module in ADAPTER_MODULES:
        importlib.import_module(module)
    for module in [m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(",") if m.strip()]:
        try:
            importlib.import_module(module)
        except Exception as exc:
            raise PluginError(f"{PLUGINS_ENV}: cannot load module {module!r}: {error_text(exc)}") from None


def candidates_for(op: str) -> list[Candidate]:
    load_adapters()
    return [c for (o, _), c in _REGISTRY.items() if o == op]


def get_candidate(op: str, name: str) -> Candidate:
    for c in candidates_for(op):
        if c.name == name:
            return c
    raise KeyError(name)


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


def unavailable_reason(c: Candidate, device: torch.device) -> str | None:
    """Why ``c`` cannot run on ``device`` in this process, every reason joined (None when it can)."""
    problems = [p for p in map(import_problem, c.requires) if p]
    if c.cuda_only and device.type != "cuda":
        problems.append(f"needs a CUDA device; this run uses {device.type}")
    elif c.min_capability and device.type == "cuda":
        cap = torch.cuda.get_device_capability(device)
        if cap < c.min_capability:
            need = ".".join(map(str, c.min_capability))
            problems.append(f"needs compute capability >= {need}; this GPU has {cap[0]}.{cap[1]}")
    return "; ".join(problems) or None
