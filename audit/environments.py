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

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONFIG_NAME = "audit.toml"
MIN_PYTHON = (3, 10)
PROBE_TIMEOUT_S = 120.0


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
        mode, _, env = slot.partition("@")
        name = env or self.modes.get(mode)
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


def load(config: Path | None, envs: list[str], mode_envs: list[str], known_modes: list[str]) -> Environments:
    """The environments from ``config`` (or ./audit.toml when it exists), then the command line.
    Raises ConfigError naming the problem: a missing given config, a table of the wrong shape, a
    mode that does not exist, or a mode mapped to an environment that is not named."""
    data: dict = {}
    if config is not None:
        if not config.is_file():
            raise ConfigError(f"--config {config}: no such file")
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
    pythons = tables["environments"] | _pairs(envs, "--env")
    modes = tables["modes"] | _pairs(mode_envs, "--mode-env")
    for mode, env in modes.items():
        if mode not in known_modes:
            raise ConfigError(f"mode {mode!r} is not a mode; valid: {', '.join(known_modes)}")
        if env not in pythons:
            raise ConfigError(f"mode {mode} is mapped to environment {env!r}, which is not named; named: "
                              f"{', '.join(pythons) or 'none'}")
    return Environments(pythons, modes)


PROBE = r"""
import json, sys
info = {"python": sys.executable, "python_version": ".".join(map(str, sys.version_info[:3]))}
if sys.version_info < MIN:
    info["problem"] = f"Python {info['python_version']} is too old for the audit's worker (needs >= {'.'.join(map(str, MIN))})"
else:
    import importlib, importlib.metadata
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
        info["torch"] = torch.__version__
        info["cuda"] = torch.version.cuda
        info["cuda_available"] = torch.cuda.is_available()
        libraries = {}
        for name in LIBRARIES:
            try:
                libraries[name] = importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                libraries[name] = None
        info["libraries"] = libraries
print(json.dumps(info))
"""


def probe(python: str, needs_cuda: bool = False) -> dict:
    """What interpreter ``python`` holds: ``python``, ``python_version``, ``torch``, ``cuda``,
    ``libraries`` (the report's library list), or ``problem`` with the exact reason it cannot run a
    worker: the path does not exist, is not an interpreter, is too old, lacks torch or safetensors,
    or (``needs_cuda``) its torch sees no CUDA device."""
    from .environment import LIBRARIES

    path = Path(python)
    if not path.exists():
        return {"python": python, "problem": f"{python} does not exist"}
    code = PROBE.replace("MIN", repr(MIN_PYTHON)).replace("LIBRARIES", repr(LIBRARIES))
    try:
        done = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, env=worker_environment())
    except OSError as exc:
        return {"python": python, "problem": f"{python} cannot be run: {exc.strerror or exc}"}
    except subprocess.TimeoutExpired:
        return {"python": python, "problem": f"{python} did not answer within {PROBE_TIMEOUT_S:.0f} s"}
    lines = done.stdout.strip().splitlines()
    try:
        info = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"python": python, "problem": f"{python} is not a usable Python (exit {done.returncode}): {tail}"}
    if "problem" not in info and needs_cuda and not info.get("cuda_available"):
        info["problem"] = (f"its torch {info.get('torch')} (CUDA {info.get('cuda')}) sees no CUDA device: "
                           "a CPU build, or a CUDA build that does not match this GPU's driver")
    return info


def worker_path() -> str:
    """PYTHONPATH for a process in another environment: this repository only."""
    return str(REPO)


def worker_environment() -> dict[str, str]:
    """The variables a probe of another environment runs with: this process's, with PYTHONPATH
    replaced by ``worker_path()``, as the mode's worker will have it (so what the probe sees is
    what the worker will see, not this environment's packages)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": worker_path()}


def check(python: str, device: str) -> dict:
    """``probe`` plus, where the interpreter can run a worker, ``availability``: which modes and
    candidates can run there (``audit.envcheck`` run in that interpreter), or ``problem``."""
    info = probe(python, needs_cuda=device == "cuda")
    if "problem" in info:
        return info
    try:
        done = subprocess.run([python, "-m", "audit.envcheck", device], capture_output=True, text=True, cwd=REPO,
                              env=worker_environment(), timeout=PROBE_TIMEOUT_S * 3, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return info | {"problem": f"{python} did not say within {PROBE_TIMEOUT_S * 3:.0f} s which modes and candidates it can run"}
    try:
        info["availability"] = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        info["problem"] = f"{python} could not say which modes and candidates it can run (exit {done.returncode}): {tail}"
    return info
