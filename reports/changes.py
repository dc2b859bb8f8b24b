"""What a kind's diff records about one matched pair of reports (an ``OpDiff``), and the
classification every kind shares.

A change of state is a ``regression`` (a bitwise-equal comparison now differs; a repeatable one is
no longer repeatable; something available is now unavailable), an ``improvement`` (the reverse),
a ``change`` (the count of differing elements changed on a comparison not known to be
non-repeatable) or ``noise`` (any change on a comparison that is not repeatable on either side;
never a regression).
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel

from .schema import Cmp, Environment

ChangeKind = Literal["regression", "improvement", "change", "noise"]


class EnvChange(BaseModel):
    field: str
    old: str
    new: str


class Change(BaseModel):
    kind: ChangeKind
    candidate: str
    reference: str | None = None  # bitwise: the other side of the comparison; prior-art: the mode
    case: str | None = None
    tensor: str | None = None
    old: str
    new: str


class Latency(BaseModel):
    mode: str
    candidate: str
    size: str
    fwd_ratio: float  # NEW / OLD
    fwd_bwd_ratio: float


class OpDiff(BaseModel):
    kind: str
    op: str
    old_file: str
    new_file: str
    environment: list[EnvChange] = []
    appeared: list[str] = []
    disappeared: list[str] = []
    changes: list[Change] = []
    latency: list[Latency] = []
    unknown_repeatability: list[Literal["old", "new"]] = []


def _env_fields(env: Environment) -> dict[str, str]:
    fields = {k: json.dumps(getattr(env, k)) for k in ("gpu", "capability", "torch", "cuda", "python", "tf32")}
    fields |= {f"libraries.{k}": json.dumps(v) for k, v in env.libraries.items()}
    fields |= {f"mode_environment.{m}": json.dumps(v, sort_keys=True) for m, v in env.mode_environment.items()}
    return fields


def environment_changes(old: Environment, new: Environment) -> list[EnvChange]:
    a, b = _env_fields(old), _env_fields(new)
    absent = "(absent)"
    return [
        EnvChange(field=k, old=a.get(k, absent), new=b.get(k, absent))
        for k in dict.fromkeys([*a, *b])
        if a.get(k) != b.get(k)
    ]


def _state(c: Cmp) -> str:
    if c.equal:
        text = "equal"
    else:
        text = f"error: {c.error}" if c.error else f"{c.differ:,}/{c.numel:,} differ"
    if c.repeatable is False:
        text = f"nondeterministic, {text} (runs differ in {c.repeat_differ:,})"
    return text


def classify(old: Cmp, new: Cmp) -> ChangeKind | None:
    """How one comparison changed between two reports (None: it did not)."""
    if old.repeatable is True and new.repeatable is False:
        return "regression"
    if old.repeatable is False and new.repeatable is True:
        return "improvement"
    noisy = old.repeatable is False or new.repeatable is False
    if old.equal and not new.equal:
        return "noise" if noisy else "regression"
    if not old.equal and new.equal:
        return "noise" if noisy else "improvement"
    if old.differ != new.differ or old.error != new.error:
        return "noise" if noisy else "change"
    return None


def availability(
    old_reason: str | None,
    new_reason: str | None,
    *,
    candidate: str,
    reference: str | None = None,
    case: str | None = None,
) -> list[Change]:
    """A regression when something available became unavailable (``new_reason`` says why), an
    improvement for the reverse; nothing when its availability did not change."""
    if (old_reason is None) == (new_reason is None):
        return []
    kind: ChangeKind = "regression" if new_reason is not None else "improvement"
    old = f"unavailable: {old_reason}" if old_reason else "available"
    new = f"unavailable: {new_reason}" if new_reason else "available"
    return [Change(kind=kind, candidate=candidate, reference=reference, case=case, old=old, new=new)]


def reason(entry: object) -> str | None:
    """Why an entry is unavailable; None when it ran."""
    return getattr(entry, "unavailable", None)


def state_change(old: Cmp, new: Cmp, *, candidate: str, reference: str | None, case: str, tensor: str) -> list[Change]:
    """One comparison's change of state between the reports (``classify``), or none."""
    kind = classify(old, new)
    if kind is None:
        return []
    return [
        Change(
            kind=kind,
            candidate=candidate,
            reference=reference,
            case=case,
            tensor=tensor,
            old=_state(old),
            new=_state(new),
        )
    ]
