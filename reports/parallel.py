"""The ``h3_parallel`` report: sharded computations against the single-process ones, bitwise.

Per candidate and case, two comparisons of the combined output and gradients with the same
candidate unsharded: ``native`` (reduced tensors summed by the backend's all-reduce) and
``fixed_order`` (every rank's partial summed in rank order). ``reduced`` names the tensors that
went through a reduction under the layout; every other tensor was gathered, each element computed
by one rank. A run that stopped (a rank failed, or the run timed out) keeps its finished cases and
says why in ``failed``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .schema import CaseComparison, CaseKey, Environment, ReportBase, Strict, Unavailable

ParallelVerdict = Literal[
    "bitwise", "bitwise with the fixed-order reduction", "gathered bitwise", "differs", "unavailable"
]


class ParallelCase(Strict):
    native: CaseComparison
    fixed_order: CaseComparison


class ParallelCandidate(Strict):
    source: str
    reduced: list[str]
    seconds: float = Field(ge=0)
    cases: dict[CaseKey, ParallelCase]
    failed: str | None = None


class ParallelReport(ReportBase):
    kind: Literal["h3_parallel"]
    environment: Environment
    layout: Literal["tp_column", "tp_row", "sp_rows"]
    ranks: int = Field(ge=1)
    backend: str
    nccl_environment: dict[str, str]
    cases: list[int]
    results: dict[str, ParallelCandidate | Unavailable]


def decide(c: ParallelCandidate) -> tuple[ParallelVerdict, str]:
    """One candidate's verdict over every case: ``bitwise`` (everything equal with either
    reduction), ``bitwise with the fixed-order reduction`` (only then), ``gathered bitwise`` (the
    gathered tensors equal, some reduced one differs either way), ``differs`` (a gathered tensor
    differs) or ``unavailable`` (no case finished)."""
    if not c.cases:
        return "unavailable", c.failed or "no case finished"
    stopped = f"; stopped early: {c.failed}" if c.failed else ""
    differ = {
        how: [t for case in c.cases.values() for t, cmp in getattr(case, how).by_tensor().items() if not cmp.equal]
        for how in ("native", "fixed_order")
    }
    gathered = [t for t in dict.fromkeys(differ["native"] + differ["fixed_order"]) if t not in c.reduced]
    if gathered:
        return "differs", f"gathered {', '.join(gathered)} differ from the single process{stopped}"
    if not differ["native"] and not differ["fixed_order"]:
        compared = {t for case in c.cases.values() for t in case.native.by_tensor()}
        summed = [t for t in c.reduced if t in compared]  # a forward-only candidate has no gradients to sum
        return (
            "bitwise",
            f"every tensor bitwise equal with either reduction ({', '.join(summed) or 'none'} reduced){stopped}",
        )
    if not differ["fixed_order"]:
        return (
            "bitwise with the fixed-order reduction",
            f"the backend's all-reduce changes {', '.join(dict.fromkeys(differ['native']))}{stopped}",
        )
    return (
        "gathered bitwise",
        f"gathered tensors equal; reduced {', '.join(dict.fromkeys(differ['fixed_order']))} differ "
        f"with either reduction{stopped}",
    )
