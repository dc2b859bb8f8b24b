"""``--attention`` and ``--deterministic``, shared by ``audit chain`` and ``audit trajectory``: the
options, and the setting they give (``audit.core.backends``), checked before anything runs."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from audit.cli.checks import usage_error
from audit.core.backends import ATTENTION, REPEATABLE_BACKWARD, Setting, default_setting, problem

_RULE = ", ".join(
    f"{d}: {s.attention}{' + deterministic' if s.deterministic else ''}" for d, s in REPEATABLE_BACKWARD.items()
)

AttentionOpt = Annotated[
    Optional[str],
    typer.Option(
        "--attention",
        help=f"SDPA backend of the attention stage ({', '.join(ATTENTION)}), pinned through "
        "torch.nn.attention.sdpa_kernel; the report records the one torch ran. Default: auto; for chain --backward "
        f"the fastest setting under which the provider's backward repeats bit for bit ({_RULE}).",
    ),
]
DeterministicOpt = Annotated[
    Optional[bool],
    typer.Option(
        "--deterministic/--no-deterministic",
        help="torch.use_deterministic_algorithms(True) in the worker, with CUBLAS_WORKSPACE_CONFIG=:4096:8 in its "
        "recorded variables. Default: off; with --backward as the --attention default says.",
    ),
]


def setting(
    attention: Optional[str], deterministic: Optional[bool], *, device_type: str, backward: bool
) -> tuple[Setting, bool]:
    """(the setting, whether it is wholly the default rule's): what is not given comes from
    ``default_setting``. An unknown backend, or one this torch lacks, is one line and exit 2."""
    if attention is not None and (why := problem(attention)):
        raise usage_error(f"--attention: {why}")
    rule = default_setting(device_type, backward)
    chosen = Setting(
        rule.attention if attention is None else attention,
        rule.deterministic if deterministic is None else deterministic,
    )
    return chosen, attention is None and deterministic is None
