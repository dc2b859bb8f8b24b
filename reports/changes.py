"""What a kind's diff records about one matched pair of reports (an ``OpDiff``), and the
classification every kind shares.

Every comparison, case, candidate or mode is in one of six states (``State``): ``equal``,
``equal, not repeatable``, ``differs`` (stably), ``differs, not repeatable``, ``unavailable`` or
``absent``. ``TABLE`` maps each (old state, new state) to a ``ChangeKind``; it is the table in the
README's "Deciding" section:

- ``regression``: equal bits now differ, something repeatable is no longer, something available is
  now unavailable;
- ``improvement``: differing or non-repeatable bits are now equal and repeatable, or something
  unavailable now runs and is equal;
- ``change``: a new stable difference where the bits already differed or nothing ran (never an
  improvement), or a changed count of differing elements on a stable comparison;
- ``noise``: a change between non-repeatable states; never a regression;
- ``lost``: present in the old report, absent from the new one (recorded as a ``Lost`` entry);
- ``kernel change``: outside ``TABLE``: the kernels one pass (forward or backward) of a candidate
  ran on a case changed, whatever the bits did (``kernel_changes``); never a regression.

A comparison without a ``repeatable`` field (repeatability unknown) counts as stable, except that
a change between unknown and not repeatable is noise: nothing tells it from nondeterminism.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from typing import Literal, get_args

from pydantic import BaseModel, computed_field

from .schema import Cmp, Environment

ChangeKind = Literal["regression", "improvement", "change", "noise", "kernel change", "lost"]
State = Literal["equal", "equal, not repeatable", "differs", "differs, not repeatable", "unavailable", "absent"]
STATES: tuple[State, ...] = get_args(State)

_E, _EN, _D, _DN, _U, _A = STATES
# (old, new) -> kind. On the diagonal the kind applies only when the count of differing elements
# (or the error) changed; None: no change. Absent -> anything is not a change ("appeared").
TABLE: dict[tuple[State, State], ChangeKind | None] = {
    **{(old, _A): "lost" for old in (_E, _EN, _D, _DN, _U)},
    **{(_A, new): None for new in STATES},
    **{(old, _U): "regression" for old in (_E, _EN, _D, _DN)},
    (_U, _U): None,
    (_E, _E): None,
    (_E, _EN): "regression",
    (_E, _D): "regression",
    (_E, _DN): "regression",
    (_EN, _E): "improvement",
    (_EN, _EN): None,
    (_EN, _D): "regression",
    (_EN, _DN): "noise",
    (_D, _E): "improvement",
    (_D, _EN): "regression",
    (_D, _D): "change",
    (_D, _DN): "regression",
    (_DN, _E): "improvement",
    (_DN, _EN): "noise",
    (_DN, _D): "change",
    (_DN, _DN): "noise",
    (_U, _E): "improvement",
    (_U, _EN): "change",
    (_U, _D): "change",
    (_U, _DN): "change",
}


class EnvChange(BaseModel):
    field: str
    old: str
    new: str


class Change(BaseModel):
    kind: ChangeKind
    candidate: str
    reference: str | None = None  # bitwise: the other side of the comparison; prior-art: the mode
    case: str | None = None
    tensor: str | None = None  # a kernel change: the pass, "forward" or "backward"
    old: str
    new: str


class Latency(BaseModel):
    mode: str
    candidate: str
    size: str
    fwd_ratio: float  # NEW / OLD
    fwd_bwd_ratio: float


class Lost(BaseModel):
    """Something the old report had and the new one lacks: ``what`` names it (e.g. ``candidate
    liger``, ``diffusers vs rl_kernel, case 257: dgate``), ``names`` are the candidate, case, mode,
    op and tensor names ``--allow-missing`` matches, ``old`` its state in the old report, and
    ``allowed`` whether ``--allow-missing`` said the loss was intended (then it fails no gate)."""

    kind: Literal["lost"] = "lost"
    report: str  # the report's kind and op
    what: str
    names: list[str]
    old: str
    allowed: bool = False

    def line(self) -> str:
        """One line: the report, what it lost and its old state, and, where ``--allow-missing`` did
        not name the loss, the name that accepts it."""
        accept = "" if self.allowed else f"; --allow-missing {self.names[0]} accepts it"
        return f"{self.report}: {self.what} lost (was {self.old}){accept}"


class OpDiff(BaseModel):
    """One matched pair of reports. ``lost`` holds what the old report had and the new one lacks,
    each at the highest level it is missing (a lost candidate is not also listed per case);
    ``disappeared`` names them as lines."""

    kind: str
    op: str
    old_file: str
    new_file: str
    environment: list[EnvChange] = []
    appeared: list[str] = []
    lost: list[Lost] = []
    changes: list[Change] = []
    latency: list[Latency] = []
    unknown_repeatability: list[Literal["old", "new"]] = []

    @computed_field  # type: ignore[prop-decorator]
    @property
    def disappeared(self) -> list[str]:
        """Each lost entry as a line: what, its old state, and whether it was allowed."""
        return [f"{x.what} (was {x.old}){' — allowed' if x.allowed else ''}" for x in self.lost]

    def lose(self, what: str, *, names: list[str | None], old: str) -> None:
        """Record something of the old report that the new one lacks."""
        found = [n for n in dict.fromkeys([*names, self.op]) if n]
        self.lost.append(Lost(report=f"{self.kind} {self.op}", what=what, names=found, old=old))


def _env_fields(env: Environment) -> dict[str, str]:
    fields = {k: json.dumps(getattr(env, k)) for k in ("gpu", "capability", "torch", "cuda", "python", "tf32")}
    fields |= {f"libraries.{k}": json.dumps(v) for k, v in env.libraries.items()}
    fields |= {f"mode_environment.{m}": json.dumps(v, sort_keys=True) for m, v in env.mode_environment.items()}
    fields |= {
        f"dispatch.{m}.{k}": json.dumps(v, sort_keys=True)
        for m, switches in (env.dispatch or {}).items()
        for k, v in switches.model_dump().items()
    }
    return fields


def environment_changes(old: Environment, new: Environment) -> list[EnvChange]:
    a, b = _env_fields(old), _env_fields(new)
    absent = "(absent)"
    return [
        EnvChange(field=k, old=a.get(k, absent), new=b.get(k, absent))
        for k in dict.fromkeys([*a, *b])
        if a.get(k) != b.get(k)
    ]


def state(c: Cmp) -> State:
    """The state of one comparison (repeatability unknown counts as repeatable)."""
    if c.equal:
        return "equal, not repeatable" if c.repeatable is False else "equal"
    return "differs, not repeatable" if c.repeatable is False else "differs"


def worst(states: Iterable[State]) -> State:
    """The state a set of comparisons is in together: stably different if one is, else not
    repeatable if one is, else equal (also when there is none)."""
    found = set(states)
    for s in ("differs", "differs, not repeatable", "equal, not repeatable"):
        if s in found:
            return s  # type: ignore[return-value]
    return "equal"


def _describe(c: Cmp) -> str:
    if c.equal:
        text = "equal"
    else:
        text = f"error: {c.error}" if c.error else f"{c.differ:,}/{c.numel:,} differ"
    if c.repeatable is False:
        text = f"nondeterministic, {text} (runs differ in {c.repeat_differ:,})"
    return text


def classify(old: Cmp, new: Cmp) -> ChangeKind | None:
    """How one comparison changed between two reports (``TABLE``; None: it did not)."""
    counted = old.equal != new.equal or old.differ != new.differ or old.error != new.error
    if {old.repeatable, new.repeatable} == {None, False}:
        return "noise" if counted else None
    a, b = state(old), state(new)
    if a == b and not counted:
        return None
    return TABLE[(a, b)]


def availability(
    old_reason: str | None,
    new_reason: str | None,
    *,
    now: State = "equal",
    candidate: str,
    reference: str | None = None,
    case: str | None = None,
) -> list[Change]:
    """How something's availability changed (``TABLE``; ``new_reason`` says why it is unavailable
    now, ``now`` is its state when it runs now); nothing when its availability did not change."""
    if (old_reason is None) == (new_reason is None):
        return []
    # from every state that ran to unavailable is the same kind
    kind = TABLE[("equal", "unavailable")] if new_reason is not None else TABLE[("unavailable", now)]
    old = f"unavailable: {old_reason}" if old_reason else "available"
    new = f"unavailable: {new_reason}" if new_reason else f"available, {now}"
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
            old=_describe(old),
            new=_describe(new),
        )
    ]


def compare_tensors(
    old: dict[str, Cmp],
    new: dict[str, Cmp],
    found: OpDiff,
    *,
    candidate: str,
    reference: str | None,
    case: str,
    where: str,
) -> None:
    """Per tensor of one case: a state change, or a lost entry (``where`` names the case in it)
    for a tensor the new report no longer compares."""
    for tensor in (t for t in new if t in old):
        found.changes += state_change(
            old[tensor], new[tensor], candidate=candidate, reference=reference, case=case, tensor=tensor
        )
    for tensor in (t for t in old if t not in new):
        found.lose(f"{where}: {tensor}", names=[candidate, reference, case, tensor], old=_describe(old[tensor]))


Launches = dict[str, dict[str, int]]  # pass ("forward", "backward") -> kernel name -> launches


def kernel_labels(names: Iterable[str]) -> dict[str, str]:
    """Each kernel name as it reads in a table or a log line: without a leading ``void``, its
    parameter list (the balanced ``(...)`` that ends a demangled name with no space before it, so
    ``Memcpy DtoD (Device -> Device)`` stays whole) and ``(anonymous namespace)::``. Names whose
    labels would coincide keep their full text, so two kernels never read as one."""
    labels = {name: _kernel_label(name) for name in names}
    seen = Counter(labels.values())
    return {name: label if seen[label] == 1 else name for name, label in labels.items()}


def _kernel_label(name: str) -> str:
    label = name.removeprefix("void ")
    if label.endswith(")"):
        depth = 0
        for i in range(len(label) - 1, -1, -1):
            depth += {")": 1, "(": -1}.get(label[i], 0)
            if depth == 0:
                if i > 0 and label[i - 1] != " ":
                    label = label[:i]
                break
    return label.replace("(anonymous namespace)::", "") or name


def kernel_changes(old: dict[str, Launches | str], new: dict[str, Launches | str], *, candidate: str) -> list[Change]:
    """Per case both sides fingerprinted (a string says why one has no fingerprint) and per pass,
    a ``kernel change`` when the kernels or their launch counts differ: ``old`` and ``new`` list,
    as ``launches× label`` (``kernel_labels`` of the pass's kernels), the kernels whose launches
    differ, on each side."""
    found = []
    for case in (c for c in new if c in old):
        a, b = old[case], new[case]
        if isinstance(a, str) or isinstance(b, str):
            continue
        for phase in (p for p in b if p in a and a[p] != b[p]):
            label = kernel_labels([*a[phase], *b[phase]])
            moved = [k for k in label if a[phase].get(k) != b[phase].get(k)]

            def launches(side: dict[str, int]) -> str:
                return ", ".join(f"{side[k]}× {label[k]}" for k in moved if k in side) or "none"

            found.append(
                Change(
                    kind="kernel change",
                    candidate=candidate,
                    case=case,
                    tensor=phase,
                    old=launches(a[phase]),
                    new=launches(b[phase]),
                )
            )
    return found
