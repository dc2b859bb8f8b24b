"""The report schema: pydantic models are the single source of truth; ``audit schema`` prints
the JSON Schema generated from them. They accept the five example reports as they are.

Three kinds: ``h3_bitwise_reuse`` (outputs and gradients compared bitwise with the references, per
case), ``h3_prior_art`` (batch invariance, accuracy and latency per mode and candidate) and
``h3_conditioning_chain_replay`` (the block's conditioning chain replayed stage by stage).
Anything that could not run is ``{"unavailable": "<reason>"}`` at the level where it failed.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, model_serializer, model_validator

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


class BitwiseCandidate(BaseModel):
    """``source`` (what ran, with versions) and one ``"vs REF"`` entry per reference: case -> result."""

    model_config = ConfigDict(extra="allow", strict=True)
    __pydantic_extra__: dict[str, dict[CaseKey, CaseResult]]

    source: str

    @model_validator(mode="after")
    def _vs_keys(self) -> "BitwiseCandidate":
        for key in self.__pydantic_extra__ or {}:
            if reference_of(key) is None:
                raise ValueError(f"unexpected key {key!r}: comparisons are named 'vs <reference>'")
        return self

    def comparisons(self) -> dict[str, dict[CaseKey, CaseResult]]:
        """Reference name -> case -> result, for every ``"vs REF"`` entry."""
        return {reference_of(k): cases for k, cases in (self.__pydantic_extra__ or {}).items()}


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
        return without_none(handler(self), "inputs_sha256")


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


def drifts(c: Cmp) -> bool:
    """A stable difference: the bits differ and the difference is not known to be nondeterminism."""
    return not c.equal and c.repeatable is not False


def settled_equal(c: Cmp) -> bool:
    """The bits are equal and nothing says they change from run to run."""
    return c.equal and c.repeatable is not False


class ChainCandidate(Strict):
    """What served a stage in the candidate chains: ``name`` (``provider``: diffusers' own code) and
    ``source`` (what ran, with versions)."""

    name: str
    source: str


class ChainStage(Strict):
    """One stage of the replay. ``chained_vs_provider``: the candidate fed the candidates' earlier
    outputs against diffusers fed its own; ``isolated_vs_provider``: the candidate fed diffusers'
    earlier outputs against diffusers. Each side ran twice, so ``repeatable`` is always present.
    ``*_vs_golden``: max|x - g| / max|g| against the same chain in FP64 (null when the FP64 chain
    could not run; the replay says why in ``golden_unavailable``). ``grads`` (with
    ``--backward``): the gradient of every chain value the stage reads (its total over all readers)
    and of the parameters it owns, candidate chain against the provider's."""

    stage: str
    ops: list[str]
    candidate: ChainCandidate | Unavailable
    chained_vs_provider: Cmp
    isolated_vs_provider: Cmp
    chained_vs_golden: float | None = Field(ge=0)
    provider_vs_golden: float | None = Field(ge=0)
    grads: dict[str, Cmp] | None = None

    @model_serializer(mode="wrap")
    def _drop_absent_grads(self, handler):
        return without_none(handler(self), "grads")


class DropIn(Strict):
    """``forward``: every stage's output, chained, is bitwise the provider's, repeatably;
    ``backward``: so is every compared gradient (null without ``--backward``)."""

    forward: bool
    backward: bool | None


class ChainReplay(Strict):
    """One sequence length under one mode. ``first_drift`` / ``first_isolated_drift``: the first stage
    (forward order) whose chained / isolated output differs stably from the provider's;
    ``first_grad_drift``: the first stage in the gradient's order (``norm_out`` back to
    ``time_proj``) with a stably differing gradient. Differences that are not repeatable never count
    as drift. ``wall_s``: the whole replay of this length; ``chained_s``: one candidate-chain pass
    (forward, and backward with ``--backward``)."""

    wall_s: float = Field(ge=0)
    chained_s: float = Field(ge=0)
    stages: list[ChainStage]
    first_drift: str | None
    first_isolated_drift: str | None
    first_grad_drift: str | None
    drop_in: DropIn
    golden_unavailable: str | None = None

    @model_serializer(mode="wrap")
    def _drop_absent_golden_reason(self, handler):
        return without_none(handler(self), "golden_unavailable")

    @staticmethod
    def summary(stages: list[ChainStage]) -> dict:
        """The summary fields, derived from the stages."""

        def first(found):
            return next((s.stage for s in found), None)

        backward = all(s.grads is not None for s in stages)
        grads = [c for s in stages for c in (s.grads or {}).values()]
        return {
            "first_drift": first(s for s in stages if drifts(s.chained_vs_provider)),
            "first_isolated_drift": first(s for s in stages if drifts(s.isolated_vs_provider)),
            "first_grad_drift": first(s for s in reversed(stages) if any(map(drifts, (s.grads or {}).values()))),
            "drop_in": {
                "forward": all(settled_equal(s.chained_vs_provider) for s in stages),
                "backward": all(map(settled_equal, grads)) if backward else None,
            },
        }

    @model_validator(mode="after")
    def _summary_follows_stages(self) -> "ChainReplay":
        if len({s.grads is None for s in self.stages}) > 1:
            raise ValueError("either every stage has grads (--backward) or none has")
        missing = {s.chained_vs_golden is None or s.provider_vs_golden is None for s in self.stages}
        if missing and missing != {self.golden_unavailable is not None}:
            raise ValueError("the errors against FP64 are null exactly when golden_unavailable says why")
        expected = self.summary(self.stages)
        for key, value in expected.items():
            got = getattr(self, key)
            if (got.model_dump() if isinstance(got, DropIn) else got) != value:
                raise ValueError(f"{key} is {got!r}, but the stages give {value!r}")
        return self


class ChainMode(Strict):
    """One mode's process: what it switched on, and each length's replay (or why it could not run)."""

    description: str | None
    lengths: dict[CaseKey, ChainReplay | Unavailable]


class ChainBlock(Strict):
    hidden: int = Field(ge=1)
    heads: int = Field(ge=1)
    head_dim: int = Field(ge=1)
    ffn: int = Field(ge=1)
    freq: int = Field(ge=1)
    time_hidden: int = Field(ge=1)
    time_embed: int = Field(ge=1)
    eps: float


class ChainReport(ReportBase):
    """``h3_conditioning_chain_replay``: diffusers' MiniMax-H3 timestep path, one block and
    ``norm_out`` replayed stage by stage with candidates swapped in (``candidates``: stage -> the
    name asked for), per mode and sequence length."""

    kind: Literal["h3_conditioning_chain_replay"]
    environment: Environment
    block: ChainBlock
    lengths: list[int]
    backward: bool
    repeats: int = Field(ge=2)
    candidates: dict[str, str]
    inputs_sha256: dict[CaseKey, str]
    results: dict[str, ChainMode | Unavailable]


from .parallel import ParallelReport  # noqa: E402  (its models build on the ones above)


class Report(
    RootModel[Annotated[BitwiseReport | PriorArtReport | ChainReport | ParallelReport, Field(discriminator="kind")]]
):
    """Any report kind, told apart by ``kind``."""


KINDS: dict[str, type[BaseModel]] = {
    "h3_bitwise_reuse": BitwiseReport,
    "h3_prior_art": PriorArtReport,
    "h3_conditioning_chain_replay": ChainReport,
    "h3_parallel": ParallelReport,
}


def json_schema(kind: str | None = None) -> dict[str, Any]:
    """JSON Schema of one report kind, or of any kind when ``kind`` is None."""
    return (KINDS[kind] if kind else Report).model_json_schema()
