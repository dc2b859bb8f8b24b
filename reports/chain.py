"""The ``h3_conditioning_chain_replay`` report: diffusers' MiniMax-H3 timestep path, one block and
``norm_out`` replayed stage by stage with candidates swapped in, per mode and sequence length; its
verdicts, tables and diff.

Verdicts, one per mode and length, from the replay's ``drop_in`` and first drifts: ``drop-in``
(every stage's chained output, and every gradient with ``--backward``, bitwise the provider's,
repeatably), ``forward only`` (the outputs are, some gradient differs stably), ``drifts`` (some
stage's output differs stably; the detail names the first), ``nondeterministic`` (nothing differs
stably, but some comparison is not repeatable) or ``unavailable``.
"""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import Field, model_serializer, model_validator

from .changes import OpDiff, State, availability, compare_tensors, reason, state, worst
from .schema import (
    CaseKey,
    Cmp,
    Environment,
    FieldError,
    ReportBase,
    Strict,
    Unavailable,
    check_inputs_among,
    without_none,
)
from .sdpa import Sdpa
from .tables import Cell, Section, View, cmp_cell, unavailable_cell, visible
from .verdict import Status, Verdict

STATUSES: dict[str, Status] = {
    "drop-in": "ok",
    "forward only": "partial",
    "drifts": "bad",
    "nondeterministic": "nd",
    "unavailable": "na",
}


def drifts(c: Cmp) -> bool:
    """A stable difference: the bits differ and the difference is not known to be nondeterminism."""
    return not c.equal and c.repeatable is not False


def settled_equal(c: Cmp) -> bool:
    """The bits are equal and nothing says they change from run to run."""
    return c.equal and c.repeatable is not False


class ChainCandidate(Strict):
    """What served a stage in the candidate chains: ``name`` (``provider``: diffusers' own code),
    ``source`` (what ran, with versions) and, where one call of it served several stages (``--candidate
    gate_residual_msa+norm2_modulate=NAME``), ``serves``: those stages, in chain order."""

    name: str
    source: str
    serves: list[str] | None = None

    @model_serializer(mode="wrap")
    def _drop_absent_serves(self, handler):
        return without_none(handler(self), "serves")

    @property
    def label(self) -> str:
        """``name``, and the stages its one call serves where it serves several."""
        return f"{self.name} (one call: {'+'.join(self.serves)})" if self.serves else self.name


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
    ``norm_out`` replayed stage by stage with candidates swapped in (``candidates``: stage, or
    ``gate_residual_msa+norm2_modulate`` for one call serving both, -> the name asked for), per
    mode and sequence length."""

    kind: Literal["h3_conditioning_chain_replay"]
    environment: Environment
    block: ChainBlock
    lengths: list[int]
    backward: bool
    repeats: int = Field(ge=2)
    candidates: dict[str, str]
    inputs_sha256: dict[CaseKey, str]
    results: dict[str, ChainMode | Unavailable]
    sdpa: Sdpa | None = None  # absent in reports written before --attention existed

    @model_validator(mode="after")
    def _lengths_agree(self) -> "ChainReport":
        check_lengths(self.lengths, self.inputs_sha256, self.results)
        return self


def check_lengths(lengths: list[int], inputs_sha256: dict[str, str], results: dict) -> None:
    """FieldError unless every mode of ``results`` that ran holds each of ``lengths`` once (run or
    unavailable) and ``inputs_sha256`` names only those lengths (a chain's or a trajectory's report)."""
    keys = [str(n) for n in lengths]
    check_inputs_among(inputs_sha256, keys, "lengths")
    for mode, result in results.items():
        if not isinstance(result, Unavailable) and sorted(result.lengths) != sorted(keys):
            raise FieldError(
                ("results", mode, "lengths"),
                f"holds {', '.join(result.lengths)} where the report's are {', '.join(keys)}",
            )


class Staged(Protocol):
    """What ``candidates`` and ``incomplete`` read: a chain report, or a trajectory report (whose
    results are loops by mode, as a chain's are replays)."""

    candidates: dict[str, str]
    results: dict


def candidates(report: Staged) -> list[str]:
    """The candidate asked for at each stage, each once."""
    return list(dict.fromkeys(report.candidates.values()))


def ran(report: ChainReport) -> set[str]:
    """The candidates that served a stage in some replay (``provider`` where diffusers' own did)."""
    return {
        s.candidate.name
        for replay in _replays(report).values()
        if isinstance(replay, ChainReplay)
        for s in replay.stages
        if isinstance(s.candidate, ChainCandidate)
    }


def incomplete(report: Staged) -> dict[str, str]:
    """Every stage candidate, when a mode replayed (a trajectory: ran the loops of) some lengths but
    not another (``lengths_missed``)."""
    return dict.fromkeys(candidates(report), why) if (why := lengths_missed(report.results)) else {}


def lengths_missed(results: dict) -> str | None:
    """The first mode, length and first line of why, where a mode ran some lengths but not this one;
    None when every mode ran all or none of its lengths. ``results``: mode -> its lengths or why it
    did not run (a chain's replays, a trajectory's loops)."""
    for mode, result in results.items():
        lengths = {} if isinstance(result, Unavailable) else result.lengths
        lost = [(n, r.unavailable) for n, r in lengths.items() if isinstance(r, Unavailable)]
        if lost and len(lost) < len(lengths):
            return f"mode {mode}, length {lost[0][0]}: {lost[0][1].splitlines()[0]}"
    return None


def _verdict(mode: str, length: str, replay: ChainReplay) -> Verdict:
    drop = replay.drop_in
    if replay.first_drift:
        verdict, detail = (
            "drifts",
            f"first drift {replay.first_drift}, isolated {replay.first_isolated_drift or 'none'}",
        )
    elif not drop.forward:
        verdict, detail = "nondeterministic", "some stage's output is not repeatable"
    elif replay.first_grad_drift:
        verdict, detail = "forward only", f"gradient drift {replay.first_grad_drift}"
    elif drop.backward is False:
        verdict, detail = "nondeterministic", "some gradient is not repeatable"
    else:
        verdict, detail = "drop-in", f"every stage's {'outputs and gradients' if drop.backward else 'outputs'} bitwise"
    return Verdict("candidate chain", None, verdict, f"length {length}: {detail}", mode)


def verdicts(report: ChainReport) -> list[Verdict]:
    """One verdict per mode and length (one per mode that did not run), read from each replay's
    ``drop_in`` and first drifts."""
    found = []
    for mode, result in report.results.items():
        if isinstance(result, Unavailable):
            found.append(Verdict("candidate chain", None, "unavailable", result.unavailable, mode))
            continue
        for length, replay in result.lengths.items():
            if isinstance(replay, Unavailable):
                found.append(
                    Verdict("candidate chain", None, "unavailable", f"length {length}: {replay.unavailable}", mode)
                )
            else:
                found.append(_verdict(mode, length, replay))
    return found


def _grads_cell(grads: dict[str, Cmp]) -> Cell:
    """Every gradient of a stage in one cell: the worst state, and which tensors are in it."""
    unstable = [k for k, c in grads.items() if c.repeatable is False]
    drifting = [k for k, c in grads.items() if drifts(c)]
    if drifting:
        return Cell(f"{len(drifting)}/{len(grads)} differ: {', '.join(drifting)}", "bad")
    if unstable:
        return Cell(f"nondeterministic: {', '.join(unstable)}", "nd")
    return Cell(f"all {len(grads)} equal", "ok")


def _replay_section(title: str, replay: ChainReplay, backward: bool, view: View) -> Section:
    drop = replay.drop_in
    verdict = f"drop-in forward: {'yes' if drop.forward else 'no'}"
    if backward:
        verdict += f", backward: {'yes' if drop.backward else 'no'}"
    note = (
        f"{verdict} · first drift {replay.first_drift or 'none'} · isolated {replay.first_isolated_drift or 'none'}"
        + (f" · gradient {replay.first_grad_drift or 'none'}" if backward else "")
        + f" · {replay.wall_s:.1f} s in all, one candidate chain {replay.chained_s:.2f} s"
        + (f" · FP64: {replay.golden_unavailable}" if replay.golden_unavailable else "")
    )
    columns = [
        "stage",
        "candidate",
        "chained vs provider",
        "isolated vs provider",
        "chained vs FP64",
        "provider vs FP64",
    ]
    section = Section(title, note, columns + (["gradients"] if backward else []))
    firsts = (
        ("first drift", replay.first_drift),
        ("first isolated drift", replay.first_isolated_drift),
        ("first gradient drift", replay.first_grad_drift),
    )
    for s in replay.stages:
        name = s.candidate.name if not isinstance(s.candidate, Unavailable) else None
        if not view.keeps(name):
            continue
        marks = [label for label, stage in firsts if stage == s.stage]
        served = s.candidate
        row = [
            Cell(f"▶ {s.stage} ({', '.join(marks)})", "bad") if marks else Cell(s.stage),
            Cell(f"provider (candidate unavailable: {served.unavailable})", "na")
            if isinstance(served, Unavailable)
            else Cell(served.label),
            cmp_cell(s.chained_vs_provider),
            cmp_cell(s.isolated_vs_provider),
            *(Cell("—", "na") if e is None else Cell(f"{e:.3g}") for e in (s.chained_vs_golden, s.provider_vs_golden)),
        ]
        if backward:
            row.append(_grads_cell(s.grads or {}))
        if marks or (shown := visible(row, view)) is not None:
            section.rows.append(row if marks else shown)
    return section


def sections(report: ChainReport, view: View = View()) -> list[Section]:
    """A head, then per mode and length the stages x comparisons, the first drifts marked ▶."""
    env, b = report.environment, report.block
    out = [
        Section(
            "conditioning chain replay (diffusers MiniMax-H3: timestep path, one block, norm_out)",
            f"{env.gpu or 'CPU'} · torch {env.torch} · CUDA {env.cuda} · tf32 {env.tf32} · "
            f"rl_kernel {report.rl_kernel_commit[:12]}{' (dirty)' if report.tracked_tree_dirty is True else ''} · "
            f"hidden {b.hidden}, {b.heads}×{b.head_dim} heads, ffn {b.ffn} · backward {report.backward} · "
            f"candidates {', '.join(f'{k}={v}' for k, v in report.candidates.items())}",
        )
    ]
    for mode, found in report.results.items():
        if isinstance(found, Unavailable):
            out.append(
                Section(
                    f"mode {mode}", columns=["mode", "replay"], rows=[[Cell(mode), unavailable_cell(found.unavailable)]]
                )
            )
            continue
        for length, replay in found.lengths.items():
            title = f"mode {mode}, length {length}"
            if isinstance(replay, Unavailable):
                out.append(
                    Section(
                        title, columns=["length", "replay"], rows=[[Cell(length), unavailable_cell(replay.unavailable)]]
                    )
                )
            else:
                out.append(_replay_section(title, replay, report.backward, view))
    return out


def _replays(report: ChainReport) -> dict[tuple[str, str], ChainReplay | str]:
    """(mode, length) -> the replay, or why it did not run (length ``*``: the whole mode)."""
    found: dict[tuple[str, str], ChainReplay | str] = {}
    for mode, result in report.results.items():
        if isinstance(result, Unavailable):
            found[(mode, "*")] = result.unavailable
            continue
        for length, replay in result.lengths.items():
            found[(mode, length)] = replay.unavailable if isinstance(replay, Unavailable) else replay
    return found


def _stage_comparisons(replay: ChainReplay) -> dict[tuple[str, str], Cmp]:
    """(stage, comparison or gradient) -> Cmp."""
    found = {}
    for s in replay.stages:
        found[(s.stage, "chained")] = s.chained_vs_provider
        found[(s.stage, "isolated")] = s.isolated_vs_provider
        found.update({(s.stage, f"d{name}"): c for name, c in (s.grads or {}).items()})
    return found


def settings(*, block: dict, backward: bool, lengths: list[int], candidates: dict[str, str]) -> dict[str, object]:
    """What a replay computes, beyond its kind and op, by name: the block's sizes, whether
    gradients are compared, the lengths and the candidate asked for at each stage."""
    return {
        **{f"block.{k}": v for k, v in block.items()},
        "backward": backward,
        "lengths": list(lengths),
        **{f"candidates.{stage}": name for stage, name in candidates.items()},
    }


def problem(report: ChainReport) -> dict[str, object]:
    """The report's ``settings``. Reports whose problems differ are not compared (``reports.diff``)."""
    return settings(
        block=report.block.model_dump(), backward=report.backward, lengths=report.lengths, candidates=report.candidates
    )


def _state(replay: ChainReplay | str) -> State | str:
    """A replay's comparisons together (``worst``), or why it did not run."""
    if isinstance(replay, str):
        return f"unavailable: {replay}"
    return worst(state(c) for c in _stage_comparisons(replay).values())


def diff(old: ChainReport, new: ChainReport, found: OpDiff) -> None:
    """Per mode, length, stage and comparison: availability and state changes (``reference`` is
    the mode, ``case`` the length, ``candidate`` the stage); a mode, length, stage or comparison
    the new report lacks is lost."""
    old_r, new_r = _replays(old), _replays(new)
    found.appeared += [f"mode {m}, length {n}" for m, n in new_r if (m, n) not in old_r]
    for mode in (m for m in old.results if m not in new.results):
        states = dict.fromkeys(_state(r) for (m, _), r in old_r.items() if m == mode)
        found.lose(f"mode {mode}", names=[mode], old="; ".join(states))
    for mode, length in (k for k in old_r if k not in new_r and k[0] in new.results):
        found.lose(f"mode {mode}, length {length}", names=[mode, length], old=_state(old_r[(mode, length)]))
    for mode, length in (k for k in new_r if k in old_r):
        o, n = old_r[(mode, length)], new_r[(mode, length)]
        found.changes += availability(
            o if isinstance(o, str) else None,
            n if isinstance(n, str) else None,
            now=_state(n),
            candidate="chain",
            reference=mode,
            case=length,
        )
        if isinstance(o, str) or isinstance(n, str):
            continue
        new_stages = {s.stage: s for s in n.stages}
        old_c, new_c = _stage_comparisons(o), _stage_comparisons(n)
        for s in o.stages:
            where = f"mode {mode}, length {length}, stage {s.stage}"
            was = {t: c for (stage, t), c in old_c.items() if stage == s.stage}
            if s.stage not in new_stages:
                found.lose(where, names=[mode, length, s.stage], old=worst(map(state, was.values())))
                continue
            now = {t: c for (stage, t), c in new_c.items() if stage == s.stage}
            found.changes += availability(
                reason(s.candidate),
                reason(new_stages[s.stage].candidate),
                now=worst(map(state, now.values())),
                candidate=s.stage,
                reference=mode,
                case=length,
            )
            compare_tensors(was, now, found, candidate=s.stage, reference=mode, case=length, where=where)
