"""The ``sdpa`` block of the chain and trajectory reports: what the attention stage ran under."""

from __future__ import annotations

from .schema import Strict


class Sdpa(Strict):
    """``attention``: the SDPA backend asked for (``auto``: torch's choice; otherwise pinned through
    ``torch.nn.attention.sdpa_kernel``); ``deterministic``: torch's deterministic algorithms on, with
    ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` in the worker's variables; ``default``: the setting was the
    default rule's (``audit.core.backends.default_setting``), not given; ``ran``: per mode that ran,
    the backend the profiler saw torch run for the attention stage's call at these shapes."""

    attention: str
    deterministic: bool
    default: bool
    ran: dict[str, str]
