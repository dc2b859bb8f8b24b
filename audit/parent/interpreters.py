"""Named Python environments: which interpreter runs each mode's process.

Trainer and rollout stacks pin different torch builds, so the libraries under test cannot share one
environment. ``audit.toml`` (the working directory's, or ``--config``) names interpreters and maps
modes to them; ``--env NAME=PYTHON`` and ``--mode-env MODE=NAME`` add to or override the file:

    [environments]
    trainer = "/opt/venvs/megatron/bin/python"
    rollout-vllm = "/opt/venvs/vllm/bin/python"
    [modes]
    vllm = "rollout-vllm"
    megatron_triton = "trainer"

A mode without an entry runs in the audit's own interpreter. A mode can also run *again* in a named
environment, as its own process: ``--mode plain@trainer`` runs plain mode with the trainer's
interpreter, and its candidates are reported as ``diffusers@trainer`` (``diffusers[plain@trainer]``
for candidates that run under every mode), compared bitwise with the references computed in the
audit's own environment. That is the cross-stack question: does the rollout stack compute the same
bits as the trainer stack?

Every worker runs this repository's code (``PYTHONPATH`` points at it), so a foreign environment
needs only Python >= 3.10, torch, safetensors and numpy, plus the library under test. Its
``PYTHONPATH`` is this repository alone: the audit's own ``PYTHONPATH`` would put the audit's
packages into the other environment. ``probe`` checks
that before a mode is started there, and says exactly what is missing. Inputs are drawn from
torch's CPU generator in each process; their sha256 per case is compared with plain mode's, and a
mode whose inputs differ (a torch whose generator stream changed) is not compared.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from audit.parent.launch import REPO, ask, ended
from audit.parent.variables import is_recorded, worker_variables
from modes import Slot, get_mode

CONFIG_NAME = "audit.toml"
MIN_PYTHON = (3, 10)


class ConfigError(ValueError):
    """An unusable audit.toml or --env/--mode-env value (a usage error: exit 2)."""


@dataclass(frozen=True)
class Environments:
    """Named interpreters, and the environment each mode runs in (absent: the audit's own)."""

    pythons: dict[str, str] = field(default_factory=dict)
    modes: dict[str, str] = field(default_factory=dict)

    def python_for(self, slot: str) -> tuple[str | None, str]:
        """(environment name or None for the audit's own, interpreter path) of a mode slot:
        ``MODE@ENV`` runs in ENV, a plain mode name in its mapped environment, if any."""
        parsed = Slot.parse(slot)
        name = parsed.environment or self.modes.get(parsed.mode)
        return (name, self.pythons[name]) if name else (None, sys.executable)


def _toml(path: Path) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    try:
        return tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not TOML: {exc}") from None


def _pairs(given: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in given:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise ConfigError(f"{what} {item!r}: expected NAME=VALUE")
        out[key] = value
    return out


def _interpreter(value: str, base: Path) -> str:
    """An interpreter path as given: absolute, relative to ``base`` (the config file's directory, or
    the working directory for ``--env``), or a bare name looked up on ``PATH``. Symbolic links are
    kept (a venv's ``bin/python`` is one), so the worker runs in that venv."""
    if os.sep not in value:
        return shutil.which(value) or value
    return os.path.abspath(base / value)


def load(config: Path | None, *, envs: list[str], mode_envs: list[str], known_modes: list[str]) -> Environments:
    """The environments from ``config`` (or ./audit.toml when it exists), then the command line.
    Raises ConfigError naming the problem: a missing given config, a table of the wrong shape, a
    mode that does not exist, or a mode mapped to an environment that is not named."""
    data: dict = {}
    if config is not None:
        if not config.is_file():
            raise ConfigError(f"--config {config}: {'a directory, not a file' if config.is_dir() else 'no such file'}")
        data = _toml(config)
    elif Path(CONFIG_NAME).is_file():
        data = _toml(Path(CONFIG_NAME))
    tables = {}
    for table in ("environments", "modes"):
        value = data.get(table, {})
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ConfigError(f"[{table}] must map names to strings")
        tables[table] = dict(value)
    unknown = set(data) - {"environments", "modes"}
    if unknown:
        raise ConfigError(f"unknown table(s) in the config: {', '.join(sorted(unknown))}; valid: environments, modes")
    config_dir = (config or Path(CONFIG_NAME)).parent
    pythons = {k: _interpreter(v, config_dir) for k, v in tables["environments"].items()}
    pythons |= {k: _interpreter(v, Path.cwd()) for k, v in _pairs(envs, "--env").items()}
    modes = tables["modes"] | _pairs(mode_envs, "--mode-env")
    for mode, env in modes.items():
        if mode not in known_modes:
            raise ConfigError(f"mode {mode!r} is not a mode; valid: {', '.join(known_modes)}")
        if env not in pythons:
            raise ConfigError(
                f"mode {mode} is mapped to environment {env!r}, which is not named; named: "
                f"{', '.join(pythons) or 'none'}"
            )
    return Environments(pythons, modes)


PROBE = r"""
import json, sys
info = {"python": sys.executable, "python_version": ".".join(map(str, sys.version_info[:3]))}
if sys.version_info < MIN:
    need = ".".join(map(str, MIN))
    info["problem"] = f"Python {info['python_version']} is too old for the audit's worker (needs >= {need})"
else:
    import importlib
    missing = []
    for module in ("torch", "safetensors", "numpy"):
        try:
            importlib.import_module(module)
        except Exception as exc:
            missing.append(f"{module} ({type(exc).__name__}: {exc})")
    if missing:
        info["problem"] = "cannot run the audit's worker: missing " + ", ".join(missing)
    else:
        import torch
        from audit.core.availability import interpreter
        info.update(interpreter(), cuda_available=torch.cuda.is_available())
        if DEVICE is not None:
            try:
                from audit.core.availability import availability
                info["availability"] = availability(torch.device(DEVICE))
            except Exception as exc:
                info["problem"] = f"could not say which modes and candidates it can run: {type(exc).__name__}: {exc}"
print(json.dumps(info))
"""


def probe(python: str, *, needs_cuda: bool = False, availability_on: str | None = None, timeout: float) -> dict:
    """What interpreter ``python`` holds, seen as a worker there sees it (``worker_variables``):
    ``python``, ``python_version``, ``torch``, ``cuda``, ``libraries`` (the report's library list)
    and, with ``availability_on`` (a device type), ``availability``: which modes and candidates can
    run there (``audit.core.availability``). Or ``problem``, with the exact reason it cannot run a
    worker: the path does not exist, is not an interpreter, is too old, lacks torch, safetensors or
    numpy, did not answer within ``timeout`` seconds, answered with anything but the expected
    object, or (``needs_cuda``) its torch sees no CUDA device. One process per interpreter and
    question (``audit.parent.launch.ask``): the answer is kept for the rest of this process."""
    return dict(_probe(python, needs_cuda, availability_on, timeout))


@functools.cache
def _probe(python: str, needs_cuda: bool, availability_on: str | None, timeout: float) -> dict:
    if not Path(python).exists():
        return {"python": python, "problem": f"{python} does not exist"}
    code = PROBE.replace("MIN", repr(MIN_PYTHON)).replace("DEVICE", repr(availability_on))
    try:
        status, out, err = ask([python, "-c", code], timeout=timeout, variables=worker_variables_elsewhere())
    except OSError as exc:
        return {"python": python, "problem": f"{python} cannot be run: {exc.strerror or exc}"}
    if status is None:
        return {"python": python, "problem": f"{python} {ended(None, timeout=timeout)} without answering"}
    info = _answer(out)
    if info is None:
        tail = (err.strip().splitlines() or ["no output"])[-1]
        return {"python": python, "problem": f"{python} is not a usable Python ({ended(status)}): {tail}"}
    if "problem" not in info and needs_cuda and not info.get("cuda_available"):
        info["problem"] = (
            f"its torch {info.get('torch')} (CUDA {info.get('cuda')}) sees no CUDA device: "
            "a CPU build, or a CUDA build that does not match this GPU's driver"
        )
    return info


def _answer(out: str) -> dict | None:
    """The probe's answer: its last line as the expected object, or None for anything else."""
    lines = out.strip().splitlines()
    try:
        info = json.loads(lines[-1])
    except (IndexError, ValueError, RecursionError):
        return None
    if not isinstance(info, dict) or not all(isinstance(info.get(k), str) for k in ("python", "python_version")):
        return None
    if "problem" in info:
        return info if isinstance(info["problem"], str) else None
    expected = {"torch": str, "libraries": dict, "cuda_available": bool}
    if not all(isinstance(info.get(k), t) for k, t in expected.items()):
        return None
    if "availability" in info and not isinstance(info["availability"], dict):
        return None
    return info


def worker_variables_elsewhere(variables: dict[str, str] | None = None) -> dict[str, str]:
    """The variables of a process in another environment: ``variables`` (default: this process's)
    with ``PYTHONPATH`` this repository alone, so that none of this environment's packages leak in
    and the probe sees what the worker will see."""
    base = os.environ if variables is None else variables
    return {k: v for k, v in base.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(REPO)}


def check(python: str, device: str, *, timeout: float) -> dict:
    """``probe`` with ``availability`` for ``device`` (a device type), or ``problem``."""
    return probe(python, needs_cuda=device == "cuda", availability_on=device, timeout=timeout)


@dataclass(frozen=True)
class WorkerSetup:
    """How one mode slot's worker starts: its environment's name (None: the audit's own), its
    interpreter, its variables and what the report records of them; or why it cannot start."""

    environment: str | None
    python: str
    variables: dict[str, str]
    recorded: dict[str, str]
    problem: str | None = None


def worker_setup(
    slot: str, *, environments: Environments, inherit: tuple[str, ...], needs_cuda: bool, timeout: float
) -> WorkerSetup:
    """The worker of mode slot ``slot`` (``MODE`` or ``MODE@ENV``): the mode's variables
    (``audit.parent.variables``), and the interpreter of its environment, which is probed first."""
    variables, recorded = worker_variables(os.environ, get_mode(slot), inherit)
    name, python = environments.python_for(slot)
    if name is None:
        return WorkerSetup(None, python, variables, recorded)
    found = probe(python, needs_cuda=needs_cuda, timeout=timeout)
    variables = worker_variables_elsewhere(variables)
    recorded = {k: v for k, v in sorted(variables.items()) if is_recorded(k)}
    return WorkerSetup(name, python, variables, recorded, found.get("problem"))
