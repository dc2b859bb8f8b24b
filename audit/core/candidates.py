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
import pkgutil
import os
from dataclasses import dataclass, field
from typing import Callable, Protocol

import torch

from audit.core.packages import error_text, import_problem
from modes import Slot, get_mode

Forward = Callable[[dict[str, torch.Tensor]], "torch.Tensor | tuple[torch.Tensor, ...]"]
Accepts = Callable[[dict[str, torch.Tensor], torch.device], "str | None"]
# (this rank's input shards, its upstream-gradient shard, the ranks) -> the whole reduced gradients
ChunkOrder = Callable[[dict[str, torch.Tensor], torch.Tensor, "Ranks"], dict[str, torch.Tensor]]
ADAPTERS = "adapters"  # the package whose every module registers the candidates of one library
PLUGINS_ENV = "AUDIT_PLUGINS"  # comma-separated extra modules that register candidates


@dataclass(frozen=True)
class Candidate:
    name: str
    op: str
    forward: Forward = field(repr=False)
    source: Callable[[str, torch.device], str] = field(repr=False)  # (mode, device) -> what ran
    grads: tuple[str, ...] | None = None  # None: every gradient the op defines
    requires: tuple[str, ...] = ()  # importable modules, or ``module:name`` for a name one must
    # provide (``audit.core.packages.import_problem``), checked before the candidate runs
    cuda_only: bool = False
    min_capability: tuple[int, int] | None = None
    all_modes: bool = False  # runs under every mode as name[mode]; otherwise in ``mode`` only
    mode: str = "plain"  # the one mode a candidate that is not all_modes runs in
    computes: str | None = None  # candidate whose computation this one implements, evaluated in
    # FP64 as its accuracy reference; None: the op's first reference (diffusers)
    accepts: Accepts | None = field(default=None, repr=False)  # why it cannot take these inputs' shapes
    # on this device (tensors, possibly on the meta device, in; a reason or None out); None: any shapes
    # the op allows. A refused case is unavailable with that reason; the other cases run
    prepare: Callable[[torch.device], None] | None = field(default=None, repr=False)  # work done once per
    # process before the candidate computes on the device (rl_kernel: build or load its CUDA extension),
    # timed as the process's ``build`` phase; raising makes the candidate unavailable with the reason
    chunk_order: dict[str, ChunkOrder] = field(default_factory=dict, repr=False)  # layout -> the sharded
    # computation of the gradients the layout reduces, each folded from chunk partials in the
    # single-process order (``audit parallel``'s ``chunk_order`` reduction)

    def report_name(self, mode: str) -> str:
        """``name[MODE]`` for a candidate of every mode; otherwise ``name``, or ``name@ENV`` when
        its mode runs again in environment ENV (mode ``MODE@ENV``)."""
        if self.all_modes:
            return f"{self.name}[{mode}]"
        env = Slot.parse(mode).environment
        return f"{self.name}@{env}" if env else self.name

    def runs_in(self, mode: str) -> bool:
        return self.all_modes or Slot.parse(mode).mode == self.mode


class Ranks(Protocol):
    """The ranks a ``ChunkOrder`` runs on: ``all_gather`` returns every rank's tensor in rank order
    (first dimensions may differ), ``broadcast`` rank ``src``'s tensor (others pass one of its shape)."""

    rank: int
    ranks: int

    def all_gather(self, t: torch.Tensor) -> list[torch.Tensor]: ...

    def broadcast(self, t: torch.Tensor, src: int) -> torch.Tensor: ...


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
    """Import every module of the ``adapters`` package, then the plugins named in $AUDIT_PLUGINS,
    so that they register. A plugin that fails to import (or to register) raises PluginError
    naming it."""
    package = importlib.import_module(ADAPTERS)
    for found in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        importlib.import_module(f"{ADAPTERS}.{found.name}")
    for module in [m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(",") if m.strip()]:
        try:
            importlib.import_module(module)
        except (Exception, SystemExit) as exc:  # a plugin that calls sys.exit() is a broken plugin too
            raise PluginError(f"{PLUGINS_ENV}: cannot load module {module!r}: {error_text(exc)}") from None


def candidates_for(op: str) -> list[Candidate]:
    load_adapters()
    return [c for (o, _), c in _REGISTRY.items() if o == op]


def get_candidate(op: str, name: str) -> Candidate:
    for c in candidates_for(op):
        if c.name == name:
            return c
    raise KeyError(name)


def from_report_name(op: str, name: str) -> tuple[Candidate, str]:
    """The candidate of ``op`` that reports under ``name``, and the mode it runs in there: the inverse
    of ``Candidate.report_name`` (``name[MODE]`` for a candidate of every mode, ``name`` or
    ``name@ENV`` for one of a single mode), so ``c.report_name(mode) == name``. ValueError, one line
    saying what is wrong, for a name no registered candidate of ``op`` reports under."""
    base, bracket, rest = name.partition("[")
    if bracket and not rest.endswith("]"):
        raise ValueError(f"{name!r}: a mode is written NAME[MODE], with the closing bracket")
    mode = rest.removesuffix("]") if bracket else None
    base, at, env = (base, "", "") if bracket else base.partition("@")
    try:
        c = get_candidate(op, base)
    except KeyError:
        valid = ", ".join(sorted({x.name for x in candidates_for(op)}))
        raise ValueError(f"{name!r}: no candidate {base!r} for {op}; registered: {valid}") from None
    if c.all_modes and mode is None:
        raise ValueError(f"{name!r}: {base} runs under every mode, so its report name is {base}[MODE] ({base}[plain])")
    if not c.all_modes and mode is not None:
        raise ValueError(f"{name!r}: {base} runs in mode {c.mode} only, so its report name is {base} (no [MODE])")
    if mode is None:
        mode = f"{c.mode}@{env}" if at else c.mode
    try:
        get_mode(mode)
    except KeyError as exc:
        raise ValueError(f"{name!r}: {exc.args[0]}") from None
    return c, mode


def unavailable_reason(c: Candidate, device: torch.device) -> str | None:
    """Why ``c`` cannot run on ``device`` in this process, every reason joined (None when it can)."""
    problems = list(dict.fromkeys(p for p in map(import_problem, c.requires) if p))
    if c.cuda_only and device.type != "cuda":
        problems.append(f"needs a CUDA device; this run uses {device.type}")
    elif c.min_capability and device.type == "cuda":
        cap = torch.cuda.get_device_capability(device)
        if cap < c.min_capability:
            need = ".".join(map(str, c.min_capability))
            problems.append(f"needs compute capability >= {need}; this GPU has {cap[0]}.{cap[1]}")
    return "; ".join(problems) or None
