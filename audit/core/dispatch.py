"""The dispatch switches of a mode's process: what decides which kernel serves a call when the
versions stay the same. ``switches(mode, device)`` is read in the worker after its mode is switched
on, so it is what that process really had; anything that cannot be read is ``"unavailable:
<reason>"``, never a guess.

- ``nvidia_driver``: the kernel module's version from ``/proc/driver/nvidia/version``;
- ``cublas`` and ``cublaslt``: the versions that the cuBLAS and cuBLASLt libraries loaded in this
  process report (``cublasGetProperty``, ``cublasLtGetVersion``), each with its file;
- ``cudnn``: ``torch.backends.cudnn.version()``;
- ``torch_native``: the aten overrides ``torch._native`` registered (``op@dispatch key: DSL``,
  ``(inactive)`` when switched off), or why there are none;
- ``variables``: TORCH_DISABLE_NATIVE_JIT and the cuBLAS workspace variables as this process has
  them (null: unset);
- ``deep_gemm``: whether ``deep_gemm`` imports, its version and its BF16 entry points;
- ``decisions``: per library whose adapter can read it (a ``dispatch(mode)`` function beside the
  mode's ``enable``), the decision it made in this process, e.g. SGLang's bf16 mm route.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import re
import sys
from pathlib import Path

import torch

from audit.core.packages import error_text, import_problem, version
from modes import Mode

VARIABLES = ("TORCH_DISABLE_NATIVE_JIT", "CUBLAS_WORKSPACE_CONFIG", "CUBLASLT_WORKSPACE_SIZE")
DRIVER_FILE = Path("/proc/driver/nvidia/version")


def _unavailable(why: str) -> str:
    return f"unavailable: {why}"


def nvidia_driver() -> str:
    try:
        text = DRIVER_FILE.read_text()
    except OSError as exc:
        return _unavailable(f"{DRIVER_FILE}: {exc.strerror or exc}")
    found = re.search(r"Kernel Module\s+(?:for \S+\s+)?([0-9][0-9.]*)", text)
    return found.group(1) if found else _unavailable(f"no version in {DRIVER_FILE}: {text.splitlines()[0][:120]!r}")


def _loaded(stem: str) -> str | None:
    """The file of the shared library ``stem`` (e.g. ``libcublasLt``) loaded in this process."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    pattern = re.compile(rf"(/\S*/{re.escape(stem)}\.so[.0-9]*)$")
    return next((m.group(1) for line in maps.splitlines() if (m := pattern.search(line))), None)


def cublas() -> str:
    path = _loaded("libcublas")
    if path is None:
        return _unavailable("libcublas is not loaded in this process")
    try:
        lib = ctypes.CDLL(path)
        parts = []
        for prop in (0, 1, 2):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
            value = ctypes.c_int()
            if lib.cublasGetProperty(prop, ctypes.byref(value)) != 0:
                return _unavailable(f"cublasGetProperty({prop}) failed in {path}")
            parts.append(str(value.value))
    except (OSError, AttributeError) as exc:
        return _unavailable(f"{path}: {exc}")
    return f"{'.'.join(parts)} ({path})"


def cublaslt() -> str:
    path = _loaded("libcublasLt")
    if path is None:
        return _unavailable("libcublasLt is not loaded in this process")
    try:
        lib = ctypes.CDLL(path)
        lib.cublasLtGetVersion.restype = ctypes.c_size_t
        number = lib.cublasLtGetVersion()
    except (OSError, AttributeError) as exc:
        return _unavailable(f"{path}: {exc}")
    return f"{number // 10000}.{number // 100 % 100}.{number % 100} ({path})"


def cudnn() -> str:
    try:
        found = torch.backends.cudnn.version()
    except Exception as exc:
        return _unavailable(error_text(exc))
    return str(found) if found is not None else _unavailable("torch has no cuDNN here")


def torch_native() -> list[str] | str:
    if import_problem("torch._native") is not None:
        return _unavailable(f"torch {torch.__version__} has no torch._native")
    registry = importlib.import_module("torch._native.registry")
    graphs = getattr(registry, "_graphs", None)
    if not isinstance(graphs, dict):
        return _unavailable("torch._native.registry has no _graphs table to read")
    return sorted(
        f"{op}@{key}: {node.dsl_name}{'' if node.active else ' (inactive)'}"
        for (op, key), nodes in graphs.items()
        for node in nodes
    )


def deep_gemm() -> str:
    problem = import_problem("deep_gemm")
    if problem is not None:
        return f"absent: {problem}"
    module = sys.modules["deep_gemm"]
    bf16 = sorted(n for n in dir(module) if "bf16" in n.lower())
    return f"{version('deep_gemm') or getattr(module, '__version__', 'version unknown')}; BF16 entry points: " + (
        ", ".join(bf16) if bf16 else "none"
    )


def decisions(mode: Mode) -> dict[str, str]:
    if mode.enable is None:
        return {}
    adapter = importlib.import_module(mode.enable.partition(":")[0])
    read = getattr(adapter, "dispatch", None)
    if read is None:
        return {}
    try:
        return {mode.library or adapter.__name__: read(mode)}
    except Exception as exc:
        return {mode.library or adapter.__name__: _unavailable(error_text(exc))}


def switches(mode: Mode, device: torch.device) -> dict:
    """This process's dispatch switches under ``mode`` (switched on) on ``device``; the cuBLAS,
    cuBLASLt, cuDNN and driver entries say they do not apply on a CPU device."""
    if device.type == "cuda":
        gpu = {"nvidia_driver": nvidia_driver(), "cublas": cublas(), "cublaslt": cublaslt(), "cudnn": cudnn()}
    else:
        gpu = dict.fromkeys(("nvidia_driver", "cublas", "cublaslt", "cudnn"), _unavailable("CPU device"))
    return {
        **gpu,
        "torch_native": torch_native(),
        "variables": {name: os.environ.get(name) for name in VARIABLES},
        "deep_gemm": deep_gemm(),
        "decisions": decisions(mode),
    }
