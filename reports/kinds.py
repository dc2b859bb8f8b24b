"""The report kinds: one ``ReportKind`` each, registered in ``KINDS``, the one place that lists them.

A kind is its module (the pydantic model, its verdicts, tables and diff) plus its registration
here. ``Report`` (any kind, told apart by ``kind``) is built from the registered models, so a new
kind takes one module and one entry in ``KINDS``; ``tests/test_kinds.py`` checks that each entry
provides every facet.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, Callable, Mapping, Union, get_args

from pydantic import Field, RootModel

from . import bitwise, chain, parallel, prior_art, trajectory
from .changes import OpDiff
from .schema import ReportBase
from .tables import Section, View
from .verdict import Status, Verdict, is_difference

Key = tuple[str, str, bool]


def _op_key(report: Any) -> Key:
    """(kind, op, quick): the flag is False for a kind without one."""
    return report.kind, report.op, bool(getattr(report, "quick", False))


def _key_is_the_problem(report: Any) -> dict[str, object]:
    """No setting beyond the key makes two reports of this kind different problems."""
    return {}


def kind_name(model: type[ReportBase]) -> str:
    """The ``kind`` tag of ``model``'s reports (its ``kind`` field's one literal)."""
    return get_args(model.model_fields["kind"].annotation)[0]


@dataclass(frozen=True, kw_only=True)
class ReportKind:
    """Everything the commands do with one kind of report. Each function takes the kind's model
    (``Report.root``):

    - ``verdicts``: one ``Verdict`` per candidate (and reference, mode or length, as the kind
      decides); ``statuses`` maps each verdict the kind gives to its ``Status``;
    - ``sections``: the tables ``audit show`` draws, narrowed by a ``View``;
    - ``diff``: records into an ``OpDiff`` what changed from an old report to a new one;
    - ``candidates``: the names ``audit show --candidate`` accepts;
    - ``ran``: the candidates that computed something that was compared (empty: nothing was);
    - ``incomplete``: of those, each that did not run everywhere the report asked (a case, a length),
      with why, one line;
    - ``key``: what a report is matched by in a diff and a baseline: (kind, op, quick);
    - ``problem``: the settings, beyond the key, that say which problem the report solved (name ->
      value); two reports whose settings differ are not compared;
    - ``plot``: the name of its drawing in ``reports.plot`` (matplotlib, an optional extra, is not
      imported here); None when the tables say it all.
    """

    model: type[ReportBase]
    verdicts: Callable[[Any], list[Verdict]]
    statuses: Mapping[str, Status]
    sections: Callable[[Any, View], list[Section]]
    diff: Callable[[Any, Any, OpDiff], None]
    candidates: Callable[[Any], list[str]]
    ran: Callable[[Any], set[str]]
    incomplete: Callable[[Any], dict[str, str]]
    key: Callable[[Any], Key] = _op_key
    problem: Callable[[Any], dict[str, object]] = _key_is_the_problem
    plot: str | None = None

    @classmethod
    def of(
        cls,
        module: ModuleType,
        model: type[ReportBase],
        *,
        key: Callable[[Any], Key] = _op_key,
        problem: Callable[[Any], dict[str, object]] = _key_is_the_problem,
        plot: str | None = None,
    ) -> ReportKind:
        """The kind whose module defines ``verdicts``, ``STATUSES``, ``sections``, ``diff``,
        ``candidates``, ``ran`` and ``incomplete``."""
        return cls(
            model=model,
            verdicts=module.verdicts,
            statuses=module.STATUSES,
            sections=module.sections,
            diff=module.diff,
            candidates=module.candidates,
            ran=module.ran,
            incomplete=module.incomplete,
            key=key,
            problem=problem,
            plot=plot,
        )

    @property
    def name(self) -> str:
        """The ``kind`` tag of its reports."""
        return kind_name(self.model)

    def any_difference(self, report: Any) -> bool:
        """Whether some verdict is a difference: neither passing nor unavailable (``statuses``)."""
        return any(is_difference(self.statuses[v.verdict]) for v in self.verdicts(report))


KINDS: dict[str, ReportKind] = {
    k.name: k
    for k in (
        ReportKind.of(bitwise, bitwise.BitwiseReport, plot="plot_bitwise"),
        ReportKind.of(prior_art, prior_art.PriorArtReport, plot="plot_prior_art"),
        ReportKind.of(chain, chain.ChainReport, problem=chain.problem, plot="plot_chain"),
        ReportKind.of(parallel, parallel.ParallelReport, key=parallel.key),
        ReportKind.of(trajectory, trajectory.TrajectoryReport, problem=trajectory.problem, plot="plot_trajectory"),
    )
}


class Report(RootModel[Annotated[Union[tuple(k.model for k in KINDS.values())], Field(discriminator="kind")]]):
    """Any report kind, told apart by ``kind``."""


ReportSet = dict[Key, tuple[Path, Report]]
"""Reports by their kind's key, each with the file it came from (``reports.io.load_set``)."""


def kind_of(report: Report) -> ReportKind:
    """The registered kind of a validated report."""
    return KINDS[report.root.kind]


def kind_names() -> list[str]:
    """The report kinds, in the order they are registered."""
    return list(KINDS)


def json_schema(kind: str | None = None) -> dict[str, Any]:
    """JSON Schema of one report kind, or of any kind when ``kind`` is None."""
    return (KINDS[kind].model if kind else Report).model_json_schema()
