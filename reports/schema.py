"""The models every report kind shares: pydantic models are the single source of truth; ``audit
schema`` prints the JSON Schema generated from them. With the kinds' own models they accept the
five example reports as they are.

Here: a comparison of one tensor (``Cmp``), of one case (``CaseComparison``), ``Unavailable``, the
environment, and ``ReportBase``. Each kind's report model is in its own module, and
``reports.kinds`` lists the kinds. Anything that could not run is ``{"unavailable": "<reason>"}``
at the level where it failed.
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

CaseKey = Annotated[str, Field(pattern=r"^[0-9]+$")]
UlpBucket = Annotated[str, Field(pattern=r"^([0-9]+(-[0-9]+)?|>[0-9]+|non-finite)$")]
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]  # NaN, Infinity and 1e400 are not values
Count = Annotated[int, Field(ge=0)]


def without_none(data: dict, *keys: str) -> dict:
    """``data`` without those of ``keys`` whose value is None: optional fields stay absent in JSON."""
    for key in keys:
        if data.get(key) is None:
            data.pop(key, None)
    return data


def json_path(loc: tuple) -> str:
    """``("results", "liger", "vs diffusers", "257", "out", 0)``
    -> ``$.results.liger["vs diffusers"]["257"].out[0]``."""
    out = "$"
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{part}"
        else:
            out += f"[{json.dumps(part)}]"
    return out


class FieldError(ValueError):
    """A model validator's finding about one field: ``loc`` is its path from the model being
    validated (keys and indices), which ``reports.io`` appends to the model's own location."""

    def __init__(self, loc: tuple[str | int, ...], message: str):
        super().__init__(message)
        self.loc = loc


def listed(keys: list[str], most: int = 12) -> str:
    """``keys`` joined by commas for a message, the first ``most`` of them and a count of the rest."""
    shown = ", ".join(keys[:most])
    return shown if len(keys) <= most else f"{shown} and {len(keys) - most:,} more"


def check_inputs_among(inputs_sha256: dict[str, str] | None, keys: list[str], what: str) -> None:
    """FieldError for the first key of ``inputs_sha256`` that is not among ``keys``, the report's
    ``what`` (its cases, or a chain's or trajectory's lengths): inputs recorded for a problem the
    report does not hold."""
    known = set(keys)
    for key in (k for k in inputs_sha256 or {} if k not in known):
        raise FieldError(("inputs_sha256", key), f"not among the report's {what} {listed(keys)}")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Unavailable(Strict):
    """Could not run here; ``unavailable`` says exactly why."""

    unavailable: str


class Cmp(Strict):
    """One tensor against its reference: ``equal`` iff every element has identical bits; ``differ``
    counts elements whose bits differ; ``max_abs`` is max |a - b| (float64) over elements finite on
    both sides. ``error`` is set (and ``max_abs`` null) when shapes or dtypes do not match.

    Optional fields (absent in the example reports, written by this tool):
    - ``repeatable``: both sides computed the case N times (``--repeats``) and each side got the same
      bits every time for this tensor; when false, ``repeat_differ`` is the most elements that
      differed between two runs of one side. Absent: not checked (unknown).
    - when ``differ > 0``: ``first_differ`` (row-major multi-index of the first differing element),
      ``ulp_max`` (largest ULP distance over elements finite on both sides, null when there is none)
      and ``ulp_hist`` (differing elements per ULP bucket ``1``, ``2``, ``3-4``, ... ``>1048576``,
      ``non-finite``).
    """

    equal: bool
    differ: Count
    numel: Count
    max_abs: FiniteFloat | None
    error: str | None = None
    repeatable: bool | None = None
    repeat_differ: int | None = Field(default=None, ge=1)
    first_differ: list[Annotated[int, Field(ge=0)]] | None = None
    ulp_max: int | None = Field(default=None, ge=1)
    ulp_hist: dict[UlpBucket, Annotated[int, Field(ge=1)]] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "Cmp":
        if self.equal != (self.differ == 0) and self.error is None:
            raise ValueError("equal must be true exactly when differ is 0")
        if (self.repeatable is False) != (self.repeat_differ is not None):
            raise ValueError("repeat_differ is given exactly when repeatable is false")
        where = {"first_differ", "ulp_max", "ulp_hist"} & self.model_fields_set
        if where and self.differ == 0:
            raise ValueError(f"{', '.join(sorted(where))} only apply when some element differs")
        if self.ulp_hist is not None and sum(self.ulp_hist.values()) != self.differ:
            raise ValueError("ulp_hist must count every differing element once")
        if self.differ > self.numel and self.error is None:
            raise ValueError(f"differ ({self.differ}) cannot exceed numel ({self.numel})")
        return self

    @model_serializer(mode="wrap")
    def _drop_unset_optionals(self, handler):
        data = handler(self)
        for key in ("error", "repeatable", "repeat_differ", "first_differ", "ulp_max", "ulp_hist"):
            if key not in self.model_fields_set or (key == "error" and data.get(key) is None):
                data.pop(key, None)
        return data


class CaseComparison(Strict):
    """One case: every output (``out``, in order) and every gradient both sides have, by input name."""

    out: list[Cmp]
    grads: dict[str, Cmp]

    def by_tensor(self) -> dict[str, Cmp]:
        """The comparisons by tensor label: ``out`` (``out[i]`` for several outputs), then ``d<input>``."""
        outs = {"out": self.out[0]} if len(self.out) == 1 else {f"out[{i}]": c for i, c in enumerate(self.out)}
        return outs | {f"d{n}": c for n, c in self.grads.items()}


CaseResult = CaseComparison | Unavailable


def reference_of(key: str) -> str | None:
    """The reference a ``"vs REF"`` key names; None when ``key`` is not a comparison key."""
    ref = key.removeprefix("vs ")
    return ref if ref and ref != key else None


class ModeInterpreter(Strict):
    """The interpreter a mode's process ran in, as its worker reported it; ``environment`` is the
    name from audit.toml / ``--env`` (null: the audit's own). ``inputs_sha256_as_plain`` (bitwise
    reports): whether the inputs drawn there had plain mode's fingerprints in every case, so the
    comparison is of the same problem. ``unavailable`` instead of versions when that environment
    could not run a worker (the path does not exist, no torch, ...)."""

    environment: str | None
    python: str
    python_version: str | None = None
    torch: str | None = None
    cuda: str | None = None
    libraries: dict[str, str | None] | None = None
    inputs_sha256_as_plain: bool | None = None  # bitwise: every case's inputs had plain mode's sha256
    unavailable: str | None = None

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler):
        return {k: v for k, v in handler(self).items() if k in ("environment", "python") or k in self.model_fields_set}


class DispatchSwitches(Strict):
    """What decides which kernel serves a call in one mode's process, as its worker read it with
    the mode on (``audit.core.dispatch``); an entry that could not be read is ``"unavailable:
    <reason>"``. ``torch_native``: the aten overrides torch._native registered, or why none;
    ``variables``: the listed variables as the process had them (null: unset); ``decisions``:
    library -> the dispatch decision read from it."""

    nvidia_driver: str
    cublas: str
    cublaslt: str
    cudnn: str
    torch_native: list[str] | str
    variables: dict[str, str | None]
    deep_gemm: str
    decisions: dict[str, str]


class Environment(Strict):
    """The audit's own process (``torch``, ``python``, ``libraries`` ...), the numerics variables
    of each mode's process, and, when some mode ran in another environment, ``modes``: every mode's
    interpreter with its versions (optional; absent in the example reports). ``dispatch``
    (optional): per mode, its process's dispatch switches."""

    gpu: str | None
    capability: list[int] | None = Field(min_length=2, max_length=2)
    torch: str
    cuda: str | None
    python: str
    tf32: bool
    libraries: dict[str, str | None]
    mode_environment: dict[str, dict[str, str]]
    dispatch: dict[str, DispatchSwitches] | None = None
    modes: dict[str, ModeInterpreter] | None = None

    @model_serializer(mode="wrap")
    def _drop_absent_modes(self, handler):
        return without_none(handler(self), "dispatch", "modes")


class ProcessTiming(Strict):
    """One mode's worker processes: how many ran (a crash starts another), their wall time from
    spawn to reaping in seconds, summed, and the seconds of each phase, summed, in the order a
    process meets them (``audit.core.timing`` names and defines them). A process that died before
    reporting its phases adds wall time only: that time is ``unaccounted``."""

    processes: int = Field(ge=1)
    wall: float = Field(ge=0)
    phases: dict[str, Annotated[float, Field(ge=0)]]

    @property
    def unaccounted(self) -> float:
        return self.wall - sum(self.phases.values())

    @model_validator(mode="after")
    def _phases_within_wall(self) -> "ProcessTiming":
        if self.unaccounted < -1e-6 * max(self.wall, 1.0):  # the phases are parts of the wall time
            total = self.wall - self.unaccounted
            raise FieldError(("phases",), f"add up to {total:.6f} s, more than the wall time, {self.wall} s")
        return self


class Timing(Strict):
    """Where the time of each mode's process(es) went (optional; absent in the example reports)."""

    modes: dict[str, ProcessTiming]


class ReportBase(Strict):
    rfc: str
    op: str
    rl_kernel_commit: str
    tracked_tree_dirty: bool | Literal["unknown"]
