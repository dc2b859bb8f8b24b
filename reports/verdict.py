"""Verdicts: one decision per candidate, a pure function of a validated report.

Each report kind (``reports.kinds``) gives its verdicts and maps each verdict it can give to a
``Status``: ``ok`` passes, ``na`` could not be decided (the candidate or a case did not run), and
every other status is a difference: ``partial`` (equal in part, e.g. forward only), ``bad``
(differs) or ``nd`` (not repeatable, so no stable property of the kernel).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["ok", "partial", "bad", "nd", "na"]


@dataclass(frozen=True)
class Verdict:
    candidate: str
    reference: str | None  # None: the verdict holds against every reference (or a prior-art mode)
    verdict: str  # one of the kind's verdicts (the keys of its ``statuses``)
    detail: str
    mode: str | None = None  # prior-art and chain replay only


def is_difference(status: Status) -> bool:
    """Whether a verdict of this status is a difference: neither passing nor unavailable."""
    return status not in ("ok", "na")
