"""What a mode worker tells the runner: one dataclass per event, sent as one JSON line each.

``encode`` and ``decode`` are each other's inverse for every event here; ``decode`` raises
ValueError on a line that is not one of them (the runner treats that as the worker's crash).
A unit is a case (bitwise task) or a check (prior-art task).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Callable, Union


@dataclass(frozen=True)
class Interpreter:
    """The worker's interpreter (``audit.core.availability.interpreter``)."""

    info: dict[str, Any]


@dataclass(frozen=True)
class ModeOn:
    """The mode is switched on; ``tf32`` is whether the process computes with TF32."""

    description: str | None
    tf32: bool


@dataclass(frozen=True)
class Dispatch:
    """The process's dispatch switches with its mode on (``audit.core.dispatch.switches``)."""

    switches: dict[str, Any]


@dataclass(frozen=True)
class ModeUnavailable:
    reason: str


@dataclass(frozen=True)
class Unavailable:
    candidate: str
    reason: str


@dataclass(frozen=True)
class Source:
    candidate: str
    source: str


@dataclass(frozen=True)
class Inputs:
    case: int
    sha256: str


@dataclass(frozen=True)
class Drawing:
    """The worker draws ``unit``'s inputs: a death now loses that unit for every candidate."""

    unit: Any


@dataclass(frozen=True)
class Waiting:
    """The worker waits for its turn (``audit.worker.await_turn``), its first inputs drawn: a death
    now loses no unit."""


@dataclass(frozen=True)
class Start:
    candidate: str
    unit: Any


@dataclass(frozen=True)
class Done:
    candidate: str
    unit: Any
    data: dict[str, Any]


@dataclass(frozen=True)
class Kernels:
    """What one extra, profiled evaluation of ``candidate`` on ``unit`` ran
    (``audit.core.kernels.fingerprint``), or ``{"unavailable": why}`` when it could not be profiled."""

    candidate: str
    unit: Any
    data: dict[str, Any]


@dataclass(frozen=True)
class Failed:
    candidate: str
    unit: Any
    reason: str


@dataclass(frozen=True)
class Crashed:
    """The exception that is ending the worker, as ``error_text`` words it, and the phases measured
    until then (as ``Finished``'s)."""

    reason: str
    phases: dict[str, float]


@dataclass(frozen=True)
class Finished:
    """Every unit of every runnable candidate is done; ``phases``: the seconds the process spent in
    each timing phase it measures itself (``audit.core.timing``)."""

    phases: dict[str, float]


Event = Union[
    Interpreter,
    ModeOn,
    Dispatch,
    ModeUnavailable,
    Unavailable,
    Source,
    Inputs,
    Drawing,
    Waiting,
    Start,
    Kernels,
    Done,
    Failed,
    Crashed,
    Finished,
]
Emit = Callable[[Event], None]
_BY_NAME = {cls.__name__: cls for cls in Event.__args__}


def encode(event: Event) -> str:
    return json.dumps({"event": type(event).__name__, **dataclasses.asdict(event)})


def decode(line: str) -> Event:
    try:
        fields = json.loads(line)
        return _BY_NAME[fields.pop("event")](**fields)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a worker event: {line[:200]!r} ({type(exc).__name__}: {exc})") from None


@dataclass(frozen=True)
class Job:
    """What the runner asks one mode worker to do: run ``work`` (``"module:function"``, called as
    ``function(job, op, mode, device, runnable, emit)``) for ``candidates`` over ``units`` under
    ``mode``, skipping the (candidate, unit) pairs in ``skip``; events go to file descriptor
    ``events_fd``; it computes once the runner writes a byte on ``turn_fd`` (``audit.worker.await_turn``).
    ``repeats`` and ``kernels`` (take kernel fingerprints) are the bitwise task's,
    ``sizes`` the prior-art task's; ``contention``: the repeats (bitwise) or the batch-invariance
    checks (prior art) run under competing GPU load (``audit.core.contention``)."""

    task: str
    work: str
    op: str
    mode: str
    device: str
    units: list
    candidates: list[str]
    references: list[str]
    reference_dir: str
    skip: list = dataclasses.field(default_factory=list)
    events_fd: int = -1
    turn_fd: int = -1
    repeats: int = 1
    kernels: bool = False
    sizes: dict | None = None
    contention: bool = False
    spawned: float = 0.0  # the runner's time.time() when it started the process (timing's ``start``)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Job:
        return cls(**json.loads(text))
