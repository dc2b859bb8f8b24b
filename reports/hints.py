"""Install hints for unavailable reasons: which extra of pyproject.toml brings a missing module, or,
for a module no extra can bring, the environment of its own that does.

Data only, so that ``reports`` keeps importing nothing of the project; ``tests/reports`` checks
that every extra named here exists in pyproject.toml's optional dependencies, and that every
environment's install line is the one pyproject.toml gives.
"""

from __future__ import annotations

import re

EXTRAS: dict[str, str] = {  # top-level module -> the extra that installs it
    "liger_kernel": "liger",
    "sglang": "sglang",
    "vllm": "vllm",
    "transformer_engine": "te",
    "transformer_engine_torch": "te",
    "megatron": "megatron",
    "matplotlib": "plot",
    "diffusers": "diffusers",
}

# top-level module -> what installs it into a venv of its own, where no extra can: vLLM-Omni 0.30 pins
# diffusers==0.40.0, and this project needs diffusers>=0.42.1 (pyproject.toml says so, with this line).
OWN_ENVIRONMENT: dict[str, str] = {
    "vllm_omni": "pip install vllm-omni==0.30.0 'vllm>=0.30,<0.31' safetensors",
}

_MISSING = re.compile(r"\b([A-Za-z_][\w.]*) is not installed|No module named '([A-Za-z_][\w.]*)'")


def install_hint(reason: str) -> str | None:
    """How to install the modules ``reason`` says are missing ("X is not installed", "No module
    named 'X'"): ``pip install '.[EXTRA,...]'`` for those an extra brings, then the environment of
    its own for those no extra can bring; None when neither applies."""
    tops = list(dict.fromkeys((a or b).split(".")[0] for a, b in _MISSING.findall(reason)))
    extras = list(dict.fromkeys(EXTRAS[t] for t in tops if t in EXTRAS))
    hints = [f"pip install '.[{','.join(extras)}]'"] if extras else []
    hints += [
        f"a venv of its own, {OWN_ENVIRONMENT[t]}, audited as --mode plain@ENV (README: Auditing across environments)"
        for t in tops
        if t in OWN_ENVIRONMENT
    ]
    return "; ".join(hints) or None
