"""The ``h3_denoising_trajectory`` report: the chain's one-block MiniMax-H3 model as the denoiser of
an N-step flow-matching Euler loop, the candidate chain's latent against the provider's at every
step, per mode and sequence length; its verdicts, tables and diff.

Verdicts, one per mode and length: ``equal`` (every step's latent bitwise the provider's,
repeatably), ``drifts`` (some step differs stably; the detail names the first and the trend),
``nondeterministic`` (nothing differs stably, but some step is not repeatable) or ``unavailable``.
A step whose two runs of one side differ is non-repeatable and never counts as drift.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from .changes import OpDiff, State, availability, compare_tensors, reason, state, worst
from .chain import ChainBlock, ChainCandidate, check_lengths, drifts, settled_equal
from .chain import candidates as candidates, incomplete as incomplete  # this kind's hooks are a chain's
from .chain import settings as chain_settings
from .schema import CaseKey, Cmp, Environment, FiniteFloat, ReportBase, Strict, Unavailable
from .sdpa import Sdpa
from .tables import Cell, Section, View, cmp_cell, unavailable_cell, visible
from .verdict import Status, Verdict

STATUSES: dict[str, Status] = {
    "equal": "ok",
    "drifts": "bad",
    "nondeterministic": "nd",
    "unavailable": "na",
}
GROWS, FADES = 2.0, 0.5  # rel_max_abs at the last step over that at the first differing step


class Step(Strict):
    """One step: ``cmp``, the candidate chain's latent after the step against the provider's
    (bitwise, ``repeatable`` always present); ``psnr`` in dB against the provider latent's range
    (null when equal); ``rel_max_abs``: max|Δ| / (max - min) of the provider's latent."""

    timestep: FiniteFloat
    cmp: Cmp
    psnr: FiniteFloat | None
    rel_max_abs: FiniteFloat = Field(ge=0)


Trend = Literal["grows", "stays", "fades"]


class Trajectory(Strict):
    """One length under one mode. ``first_differ``: the first step (0-based) whose latent differs
    stably; ``trend``: from that step to the last, ``grows`` when ``rel_max_abs`` ends at least
    ``GROWS`` times larger, ``fades`` at most ``FADES`` times (or equal again), otherwise ``stays``
    (null when no step differs); ``stages``: what served each stage of the candidate chain."""

    wall_s: float = Field(ge=0)
    stages: dict[str, ChainCandidate | Unavailable]
    steps: list[Step]
    first_differ: int | None
    trend: Trend | None

    @staticmethod
    def summary(steps: list[Step]) -> dict:
        """The summary fields, derived from the steps."""
        first = next((i for i, s in enumerate(steps) if drifts(s.cmp)), None)
        if first is None:
            return {"first_differ": None, "trend": None}
        start, end = steps[first].rel_max_abs, steps[-1].rel_max_abs
        trend = "grows" if end >= GROWS * start else "fades" if end <= FADES * start else "stays"
        return {"first_differ": first, "trend": trend}

    @model_validator(mode="after")
    def _summary_follows_steps(self) -> "Trajectory":
        for key, value in self.summary(self.steps).items():
            if getattr(self, key) != value:
                raise ValueError(f"{key} is {getattr(self, key)!r}, but the steps give {value!r}")
        return self


class TrajectoryMode(Strict):
    """One mode's process: what it switched on, and each length's loops (or why they could not run)."""

    description: str | None
    lengths: dict[CaseKey, Trajectory | Unavailable]


class TrajectoryReport(ReportBase):
    """``h3_denoising_trajectory``: per mode and length, the candidate chain's latent along the
    denoising loop against the provider's (``candidates``: stage, or
    ``gate_residual_msa+norm2_modulate`` for one call serving both, -> the name asked for;
    ``schedule``: where the timesteps come from; ``timesteps``: the step's t, 1 = clean)."""

    kind: Literal["h3_denoising_trajectory"]
    environment: Environment
    block: ChainBlock
    lengths: list[int]
    steps: int = Field(ge=1)
    schedule: str
    timesteps: list[FiniteFloat]
    repeats: int = Field(ge=2)
    candidates: dict[str, str]
    inputs_sha256: dict[CaseKey, str]
    sdpa: Sdpa
    results: dict[str, TrajectoryMode | Unavailable]

    @model_validator(mode="after")
    def _lengths_agree(self) -> "TrajectoryReport":
        check_lengths(self.lengths, self.inputs_sha256, self.results)
        return self


def settings(*, block: dict, steps: int, lengths: list[int], candidates: dict[str, str]) -> dict[str, object]:
    """What a trajectory computes, beyond its kind and op, by name: the chain's settings (no
    backward) and the number of steps."""
    return {**chain_settings(block=block, backward=False, lengths=lengths, candidates=candidates), "steps": steps}


def problem(report: TrajectoryReport) -> dict[str, object]:
    """The report's ``settings``. Reports whose problems differ are not compared (``reports.diff``)."""
    return settings(
        block=report.block.model_dump(), steps=report.steps, lengths=report.lengths, candidates=report.candidates
    )


def ran(report: TrajectoryReport) -> set[str]:
    """The candidates that served a stage in some loop (``provider`` where diffusers' own did)."""
    return {
        c.name
        for t in _runs(report).values()
        if isinstance(t, Trajectory)
        for c in t.stages.values()
        if isinstance(c, ChainCandidate)
    }


def _verdict(mode: str, length: str, t: Trajectory) -> Verdict:
    if t.first_differ is not None:
        last = t.steps[-1]
        psnr = "equal" if last.psnr is None else f"PSNR {last.psnr:.1f} dB"
        verdict, detail = "drifts", f"first differs at step {t.first_differ}, {t.trend}; last step {psnr}"
    elif all(settled_equal(s.cmp) for s in t.steps):
        verdict, detail = "equal", f"every one of {len(t.steps)} steps bitwise"
    else:
        verdict, detail = "nondeterministic", "some step is not repeatable"
    return Verdict("candidate chain", None, verdict, f"length {length}: {detail}", mode)


def _runs(report: TrajectoryReport) -> dict[tuple[str, str], Trajectory | str]:
    """(mode, length) -> the loops, or why they did not run (length ``*``: the whole mode)."""
    found: dict[tuple[str, str], Trajectory | str] = {}
    for mode, result in report.results.items():
        if isinstance(result, Unavailable):
            found[(mode, "*")] = result.unavailable
            continue
        for length, t in result.lengths.items():
            found[(mode, length)] = t.unavailable if isinstance(t, Unavailable) else t
    return found


def verdicts(report: TrajectoryReport) -> list[Verdict]:
    """One verdict per mode and length (one per mode that did not run)."""
    return [
        Verdict("candidate chain", None, "unavailable", f"{'' if n == '*' else f'length {n}: '}{t}", mode)
        if isinstance(t, str)
        else _verdict(mode, n, t)
        for (mode, n), t in _runs(report).items()
    ]


def _section(title: str, t: Trajectory, view: View) -> Section:
    swapped = [f"{k}={v.label}" if isinstance(v, ChainCandidate) else f"{k} unavailable" for k, v in t.stages.items()]
    note = (
        f"first differs at step {t.first_differ if t.first_differ is not None else 'none'}"
        + (f", {t.trend}" if t.trend else "")
        + f" · {t.wall_s:.1f} s · {', '.join(swapped)}"
    )
    unavailable = [f"{k}: {v.unavailable}" for k, v in t.stages.items() if isinstance(v, Unavailable)]
    if unavailable:
        note += f" · provider kept where unavailable ({'; '.join(unavailable)})"
    section = Section(title, note, ["step", "t", "latent vs provider", "PSNR dB", "max|Δ| / range"])
    for i, s in enumerate(t.steps):
        row = [
            Cell(f"▶ {i} (first)", "bad") if i == t.first_differ else Cell(str(i)),
            Cell(f"{s.timestep:.4f}"),
            cmp_cell(s.cmp),
            Cell("—" if s.psnr is None else f"{s.psnr:.1f}"),
            Cell(f"{s.rel_max_abs:.3g}"),
        ]
        if (shown := visible(row, view)) is not None:
            section.rows.append(shown)
    return section


def sections(report: TrajectoryReport, view: View = View()) -> list[Section]:
    """A head, then per mode and length the steps, the first differing one marked ▶."""
    env, b, sdpa = report.environment, report.block, report.sdpa
    out = [
        Section(
            "denoising trajectory (diffusers MiniMax-H3 one-block model as the denoiser)",
            f"{env.gpu or 'CPU'} · torch {env.torch} · hidden {b.hidden}, {b.heads}×{b.head_dim} heads, ffn {b.ffn} · "
            f"{report.steps} steps · {report.schedule} · attention {sdpa.attention} (ran "
            f"{', '.join(f'{m}: {r}' for m, r in sdpa.ran.items()) or 'none'}), deterministic {sdpa.deterministic} · "
            f"candidates {', '.join(f'{k}={v}' for k, v in report.candidates.items())}",
        )
    ]
    if not view.keeps(*candidates(report)):
        return out
    for (mode, length), t in _runs(report).items():
        title = f"mode {mode}" + ("" if length == "*" else f", length {length}")
        if isinstance(t, str):
            out.append(Section(title, columns=["length", "loops"], rows=[[Cell(length), unavailable_cell(t)]]))
        else:
            out.append(_section(title, t, view))
    return out


def _steps(t: Trajectory) -> dict[str, Cmp]:
    return {f"step {i}": s.cmp for i, s in enumerate(t.steps)}


def _state(t: Trajectory | str) -> State | str:
    """A run's steps together (``worst``), or why it did not run."""
    return f"unavailable: {t}" if isinstance(t, str) else worst(map(state, _steps(t).values()))


def diff(old: TrajectoryReport, new: TrajectoryReport, found: OpDiff) -> None:
    """Per mode, length and step: availability and state changes (``reference`` is the mode,
    ``case`` the length, ``candidate`` the stage or ``chain``, ``tensor`` the step); a mode, length
    or step the new report lacks is lost."""
    old_r, new_r = _runs(old), _runs(new)
    found.appeared += [f"mode {m}, length {n}" for m, n in new_r if (m, n) not in old_r]
    for (mode, length), t in old_r.items():
        if (mode, length) not in new_r:
            found.lose(f"mode {mode}, length {length}", names=[mode, length], old=_state(t))
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
        for stage in (s for s in n.stages if s in o.stages):
            found.changes += availability(
                reason(o.stages[stage]),
                reason(n.stages[stage]),
                now=_state(n),
                candidate=stage,
                reference=mode,
                case=length,
            )
        where = f"mode {mode}, length {length}"
        compare_tensors(_steps(o), _steps(n), found, candidate="chain", reference=mode, case=length, where=where)
