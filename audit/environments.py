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
        from audit.environment import interpreter
        info.update(interpreter(), cuda_available=torch.cuda.is_available())
        if DEVICE is not None:
            try:
                from audit.envcheck import availability
                info["availability"] = availability(torch.device(DEVICE))
            except Exception as exc:
                info["problem"] = f"could not say which modes and candidates it can run: {type(exc).__name__}: {exc}"
print(json.dumps(info))
"""


def probe(python: str, needs_cuda: bool = False, availability_on: str | None = None) -> dict:
    """What interpreter ``python`` holds, seen as a worker there sees it (``worker_environment``):
    ``python``, ``python_version``, ``torch``, ``cuda``, ``libraries`` (the report's library list)
    and, with ``availability_on`` (a device type), ``availability``: which modes and candidates can
    run there (``audit.envcheck``). Or ``problem``, with the exact reason it cannot run a worker: the
    path does not exist, is not an interpreter, is too old, lacks torch, safetensors or numpy, or
    (``needs_cuda``) its torch sees no CUDA device. One process per interpreter and question: the
    answer is kept for the rest of this process."""
    return dict(_probe(python, needs_cuda, availability_on))


@functools.cache
def _probe(python: str, needs_cuda: bool, availability_on: str | None) -> dict:
    if not Path(python).exists():
        return {"python": python, "problem": f"{python} does not exist"}
    code = PROBE.replace("MIN", repr(MIN_PYTHON)).replace("DEVICE", repr(availability_on))
    timeout = PROBE_TIMEOUT_S * (3 if availability_on else 1)
    try:
        done = subprocess.run(
            [python, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            env=worker_environment(),
        )
    except OSError as exc:
        return {"python": python, "problem": f"{python} cannot be run: {exc.strerror or exc}"}
    except subprocess.TimeoutExpired:
        return {"python": python, "problem": f"{python} did not answer within {timeout:.0f} s"}
    lines = done.stdout.strip().splitlines()
    try:
        info = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"python": python, "problem": f"{python} is not a usable Python (exit {done.returncode}): {tail}"}
    if "problem" not in info and needs_cuda and not info.get("cuda_available"):
        info["problem"] = (
            f"its torch {info.get('torch')} (CUDA {info.get('cuda')}) sees no CUDA device: "
            "a CPU build, or a CUDA build that does not match this GPU's driver"
        )
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
    """``probe`` with ``availability`` for ``device`` (a device type), or ``problem``."""
    return probe(python, needs_cuda=device == "cuda", availability_on=device)
