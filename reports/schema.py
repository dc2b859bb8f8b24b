"""The report schema: pydantic models are the single source of truth; ``audit schema`` prints
the JSON Schema generated from them. They accept the five example reports as they are.

Two kinds: ``h3_bitwise_reuse`` (outputs and gradients compared bitwise with the references, per
case) and ``h3_prior_art`` (batch invariance, accuracy and latency per mode and candidate).
Anything that could not run is ``{"unavailable": "<reason>"}`` at the level where it failed.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, model_serializer, model_validator

CaseKey = Annotated[str, Field(pattern=r"^[0-9]+$")]
UlpBucket = Annotated[str, Field(pattern=r"^([0-9]+(-[0-9]+)?|>[0-9]+|non-finite)$")]
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]  # NaN, Infinity and 1e400 are not values
Count = Annotated[int, Field(ge=0)]


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


CaseResult = CaseComparison | Unavailable


class BitwiseCandidate(BaseModel):
    """``source`` (what ran, with versions) and one ``"vs REF"`` entry per reference: case -> result."""

    model_config = ConfigDict(extra="allow", strict=True)
    __pydantic_extra__: dict[str, dict[CaseKey, CaseResult]]

    source: str

    @model_validator(mode="after")
    def _vs_keys(self) -> "BitwiseCandidate":
        for key in self.__pydantic_extra__ or {}:
            if not key.startswith("vs ") or len(key) <= 3:
                raise ValueError(f"unexpected key {key!r}: comparisons are named 'vs <reference>'")
        return self


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


class Environment(Strict):
    """The audit's own process (``torch``, ``python``, ``libraries`` ...), the numerics variables
    of each mode's process, and, when some mode ran in another environment, ``modes``: every mode's
    interpreter with its versions (optional; absent in the example reports)."""

    gpu: str | None
    capability: list[int] | None = Field(min_length=2, max_length=2)
    torch: str
    cuda: str | None
    python: str
    tf32: bool
    libraries: dict[str, str | None]
    mode_environment: dict[str, dict[str, str]]
    modes: dict[str, ModeInterpreter] | None = None

    @model_serializer(mode="wrap")
    def _drop_absent_modes(self, handler):
        data = handler(self)
        if data.get("modes") is None:
            data.pop("modes", None)
        return data


class PriorArtEnvironment(Environment):
    megatron_source_commit: str | None


class ReportBase(Strict):
    rfc: str
    op: str
    rl_kernel_commit: str
    tracked_tree_dirty: bool | Literal["unknown"]


class BitwiseReport(ReportBase):
    kind: Literal["h3_bitwise_reuse"]
    environment: Environment
    cases: list[int]
    inputs_sha256: dict[CaseKey, str] | None = None
    results: dict[str, BitwiseCandidate | Unavailable]

    @model_serializer(mode="wrap")
    def _drop_absent_fingerprints(self, handler):
        data = handler(self)
        if data.get("inputs_sha256") is None:
            data.pop("inputs_sha256", None)
        return data


class RowsDiffer(Strict):
    rows: int = Field(ge=0)
    fwd_differ: int = Field(ge=0)
    rowgrad_differ: int = Field(ge=0)


class SubBatches(Strict):
    full_batch: Count
    sub_batch_sizes: list[int]
    sub_batches: Count
    fwd_differ: int = Field(ge=0)
    rowgrad_differ: int = Field(ge=0)


class SweepFailure(Strict):
    seed: int
    batch: int
    position: int
    row: int


class BatchSizeSweep(Strict):
    batch_sizes: list[int]
    probe_rows: list[int]
    comparisons: Count
    differ: int = Field(ge=0)
    first_failures: list[SweepFailure] = Field(max_length=8)


class BatchInvariance(Strict):
    all_rows: dict[CaseKey, RowsDiffer]
    params_repeatable: bool
    full_vs_sub_batches: SubBatches
    batch_size_sweep: BatchSizeSweep
    batch_invariant: bool


class Accuracy(Strict):
    fwd_rel_err: float
    grad_rel_err: dict[str, float]
    fwd_us: float
    fwd_bwd_us: float


class PriorArtCandidate(Strict):
    source: str
    has_backward: bool
    batch_invariance: BatchInvariance
    accuracy_latency: dict[CaseKey, Accuracy]


class PriorArtReport(ReportBase):
    kind: Literal["h3_prior_art"]
    environment: PriorArtEnvironment
    quick: bool
    results: dict[str, dict[str, PriorArtCandidate | Unavailable] | Unavailable]


class Report(RootModel[Annotated[BitwiseReport | PriorArtReport, Field(discriminator="kind")]]):
    """Either report kind, told apart by ``kind``."""


KINDS: dict[str, type[BaseModel]] = {"h3_bitwise_reuse": BitwiseReport, "h3_prior_art": PriorArtReport}


def json_schema(kind: str | None = None) -> dict[str, Any]:
    """JSON Schema of one report kind, or of either kind when ``kind`` is None."""
    return (KINDS[kind] if kind else Report).model_json_schema()
