"""Install hints for unavailable reasons: which extra of pyproject.toml brings a missing module.

Data only, so that ``reports`` keeps importing nothing of the project; ``tests/reports`` checks
that every extra named here exists in pyproject.toml's optional dependencies.
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

_MISSING = re.compile(r"\b([A-Za-z_][\w.]*) is not installed|No module named '([A-Za-z_][\w.]*)'")


def install_hint(reason: str) -> str | None:
    """``pip install '.[EXTRA,...]'`` for the modules ``reason`` says are missing ("X is not
    installed", "No module named 'X'") and an extra brings; None when none does."""
    extras = [EXTRAS.get((a or b).split(".")[0]) for a, b in _MISSING.findall(reason)]
    found = list(dict.fromkeys(e for e in extras if e))
    return f"pip install '.[{','.join(found)}]'" if found else None
