"""Pictures of reports (matplotlib, the ``plot`` extra).

Prior-art: latency against rows (log-log), error against FP64 (bars), and each implementation's
verdict (green invariant, red not). Bitwise: per pair of candidates (each pair once, titled with
its verdict) a grid of the output and each gradient by case: green where every bit is equal,
otherwise coloured by the share of elements whose bits differ (pale yellow for a few, dark red
for all: 2 % and 98 % look different), magenta where a side did not repeat its own bits, grey
where nothing was compared, with the reasons listed below the grids. Chain replay: per mode and
length, the fraction of each stage's output whose bits differ from the provider's (chained and
isolated) and each stage's error against FP64 (provider and candidate chain), on log scales.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.cm import ScalarMappable  # noqa: E402
from matplotlib.colors import LinearSegmentedColormap, PowerNorm, to_rgb  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import PercentFormatter  # noqa: E402

from .bitwise import BitwiseReport, pairs, verdicts  # noqa: E402
from .chain import ChainMode, ChainReplay, ChainReport  # noqa: E402
from .kinds import Report, kind_of  # noqa: E402
from .prior_art import PriorArtCandidate  # noqa: E402
from .schema import CaseComparison, Unavailable  # noqa: E402

GREEN, RED, GREY = "#2e7d32", "#c62828", "#9e9e9e"


def _prior_art_rows(report) -> list[tuple[str, PriorArtCandidate]]:
    return [
        (name if name.endswith(f"[{mode}]") or mode == "plain" else f"{name} [{mode}]", c)
        for mode, cands in report.results.items()
        if isinstance(cands, dict)
        for name, c in cands.items()
        if isinstance(c, PriorArtCandidate)
    ]


def plot_prior_art(report, path: Path) -> None:
    rows = _prior_art_rows(report)
    fig, (lat, acc, verdict) = plt.subplots(1, 3, figsize=(18, max(5, 0.45 * len(rows) + 2)))
    for name, c in rows:
        sizes = sorted(c.accuracy_latency, key=int)
        xs = [int(s) for s in sizes]
        key = "fwd_bwd_us" if c.has_backward else "fwd_us"
        lat.plot(xs, [getattr(c.accuracy_latency[s], key) for s in sizes], marker="o", label=name)
    lat.set_xscale("log")
    lat.set_yscale("log")
    lat.set_xlabel("rows")
    lat.set_ylabel("fwd+bwd µs (fwd for forward-only)")
    lat.set_title("latency")
    lat.legend(fontsize=7)
    names = [n for n, _ in rows]
    largest = [c.accuracy_latency[max(c.accuracy_latency, key=int)] for _, c in rows]
    ys = range(len(rows))
    acc.barh([y - 0.2 for y in ys], [a.fwd_rel_err for a in largest], height=0.4, label="forward")
    acc.barh(
        [y + 0.2 for y in ys],
        [max(a.grad_rel_err.values(), default=0.0) for a in largest],
        height=0.4,
        label="worst gradient",
    )
    acc.set_yticks(list(ys), names, fontsize=7)
    acc.set_xlabel("max|err| / max|ref| vs FP64 (largest size)")
    acc.set_title("error against FP64")
    acc.legend(fontsize=7)
    colours = [GREEN if c.batch_invariance.batch_invariant else RED for _, c in rows]
    verdict.barh(list(ys), [1] * len(rows), color=colours)
    for y, (_, c) in zip(ys, rows):
        verdict.text(
            0.5,
            y,
            "invariant" if c.batch_invariance.batch_invariant else "NOT invariant",
            ha="center",
            va="center",
            color="white",
            fontsize=8,
        )
    verdict.set_yticks(list(ys), names, fontsize=7)
    verdict.set_xticks([])
    verdict.set_title("batch invariance")
    fig.suptitle(f"{report.op}: prior art{' (quick)' if report.quick else ''} on {report.environment.gpu or 'CPU'}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


ND = "#8e24aa"  # not repeatable: magenta, as in the tables
DIFFER = LinearSegmentedColormap.from_list("differ", ["#fff176", "#fb8c00", "#b71c1c"])  # never green
SHARE = PowerNorm(0.5, 0.0, 1.0)  # fraction of elements differing -> colour: 2 % and 98 % far apart


@dataclass(frozen=True)
class GridCell:
    """One tensor in one case: ``fraction`` of its elements whose bits differ (0.0: equal) and
    whether each side repeated its bits (``repeatable``, None: not checked), or ``fraction`` None
    with the ``reason`` it was not compared."""

    fraction: float | None
    differ: int = 0
    repeatable: bool | None = None
    reason: str = ""


@dataclass(frozen=True)
class PairGrid:
    """One pair of candidates (each pair once), its verdict, and a tensor x case grid of cells."""

    candidate: str
    reference: str
    verdict: str
    tensors: list[str]
    cases: list[str]
    cells: dict[tuple[str, str], GridCell]  # (tensor, case) -> cell


def bitwise_grids(report: BitwiseReport) -> list[PairGrid]:
    """A grid per compared pair (``bitwise.pairs``), with its verdict (``bitwise.verdicts``): the
    output and each gradient in their own rows, one column per case of the report."""
    decided = {(v.candidate, v.reference): v.verdict for v in verdicts(report)}
    cases = [str(c) for c in report.cases]
    grids = []
    for name, ref, found in pairs(report):
        ran = {case: c.by_tensor() for case, c in found.items() if isinstance(c, CaseComparison)}
        tensors = list(dict.fromkeys(t for case in cases if case in ran for t in ran[case])) or ["out"]
        cells = {}
        for case in cases:
            result = found.get(case)
            for t in tensors:
                if isinstance(result, Unavailable):
                    cells[(t, case)] = GridCell(None, reason=result.unavailable)
                elif result is None or t not in ran[case]:
                    cells[(t, case)] = GridCell(None, reason="not compared")
                else:
                    c = ran[case][t]
                    cells[(t, case)] = GridCell(c.differ / max(1, c.numel), c.differ, c.repeatable)
        grids.append(PairGrid(name, ref, decided[(name, ref)], tensors, cases, cells))
    return grids


def cell_colour(cell: GridCell) -> str | tuple:
    """Grey: not compared; magenta: not repeatable; green: every bit equal; any difference, however
    small, from pale yellow (a few elements) to dark red (every element), on a square-root scale."""
    if cell.fraction is None:
        return GREY
    if cell.repeatable is False:
        return ND
    if cell.fraction == 0:
        return GREEN
    return DIFFER(SHARE(cell.fraction))


def cell_text(cell: GridCell) -> str:
    """What a cell says: ``n/a``, ``equal``, or how many elements differ and their share; a
    non-repeatable cell says so first."""
    if cell.fraction is None:
        return "n/a"
    share = f"{100 * cell.fraction:.2f} %" if cell.fraction >= 1e-4 else f"{100 * cell.fraction:.1g} %"
    said = "equal" if cell.fraction == 0 else f"{cell.differ:,} differ\n{share}"
    return f"not repeatable\n{said}" if cell.repeatable is False else said


def _ink(colour) -> str:
    r, g, b = to_rgb(colour)
    return "white" if 0.299 * r + 0.587 * g + 0.114 * b < 0.5 else "black"


def _reasons(report: BitwiseReport, grids: list[PairGrid]) -> list[str]:
    """Why each unavailable candidate, and each pair's n/a cells, did not compare, one line each."""
    lines = [f"{n}: {r.unavailable}" for n, r in report.results.items() if isinstance(r, Unavailable)]
    for g in grids:
        for why in dict.fromkeys(c.reason for c in g.cells.values() if c.fraction is None):
            where = ", ".join(case for case in g.cases if any(g.cells[(t, case)].reason == why for t in g.tensors))
            lines.append(f"{g.candidate} vs {g.reference}, case {where}: {why}")
    return [textwrap.shorten(" ".join(line.split()), 400) for line in lines]


def draw_bitwise(report: BitwiseReport) -> Figure:
    """The figure ``plot_bitwise`` saves: a tensor x case grid per pair, titled with its verdict,
    two grids a row beyond three pairs; below, why what is grey did not compare."""
    grids = bitwise_grids(report)
    across = 1 if len(grids) <= 3 else 2
    down = max(1, -(-len(grids) // across))
    heights = [
        0.42 * max((len(g.tensors) for g in grids[r * across : (r + 1) * across]), default=1) + 0.9 for r in range(down)
    ]
    reasons = [wrapped for line in _reasons(report, grids) for wrapped in textwrap.wrap(line, 70 * across)]
    cases = [str(c) for c in report.cases]
    fig = plt.figure(figsize=(1.6 * len(cases) * across + 2.5, sum(heights) + 0.13 * len(reasons) + 1.6))
    fig.set_layout_engine("constrained")
    rows = fig.add_gridspec(2, 1, height_ratios=[sum(heights), 0.13 * len(reasons) + 0.01])
    axes = rows[0].subgridspec(down, across, height_ratios=heights).subplots(squeeze=False).ravel()
    for ax, g in zip(axes, grids):
        for i, t in enumerate(g.tensors):
            for j, case in enumerate(g.cases):
                cell = g.cells[(t, case)]
                colour = cell_colour(cell)
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=colour, edgecolor="white"))
                ax.text(j, i, cell_text(cell), ha="center", va="center", fontsize=6.5, color=_ink(colour))
        ax.set_xlim(-0.5, len(g.cases) - 0.5)
        ax.set_ylim(len(g.tensors) - 0.5, -0.5)
        ax.set_xticks(range(len(g.cases)), g.cases, fontsize=8)
        ax.set_yticks(range(len(g.tensors)), g.tensors, fontsize=8)
        ax.set_xlabel("case (rows)", fontsize=8)
        ax.set_title(f"{g.candidate} vs {g.reference}: {g.verdict}", fontsize=9)
    for ax in axes[len(grids) :]:
        ax.set_axis_off()
    note = fig.add_subplot(rows[1])
    note.set_axis_off()
    if reasons:
        note.text(
            0, 1, "not compared (grey, or no grid):\n" + "\n".join(reasons), fontsize=7, va="top", color="#616161"
        )
    scale = fig.colorbar(ScalarMappable(SHARE, DIFFER), ax=list(axes), shrink=0.8)
    scale.set_label("share of elements whose bits differ", fontsize=8)
    scale.ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    keys = [Patch(color=GREEN, label="equal"), Patch(color=ND, label="not repeatable"), Patch(color=GREY, label="n/a")]
    fig.legend(handles=keys, loc="outside lower center", ncols=3, fontsize=8, frameon=False)
    fig.suptitle(f"{report.op}: bitwise, output and each gradient, on {report.environment.gpu or 'CPU'}", fontsize=10)
    return fig


def plot_bitwise(report: BitwiseReport, path: Path) -> None:
    fig = draw_bitwise(report)
    fig.savefig(path, dpi=110)
    plt.close(fig)


FLOOR = 1e-12  # zero (bitwise equal, or exact) drawn on the log scale's floor


def plot_chain(report: ChainReport, path: Path) -> None:
    replays = [
        (f"{mode}, length {length}", r)
        for mode, found in report.results.items()
        if isinstance(found, ChainMode)
        for length, r in found.lengths.items()
        if isinstance(r, ChainReplay)
    ]
    fig, axes = plt.subplots(max(1, len(replays)), 2, figsize=(15, 4 * max(1, len(replays))), squeeze=False)
    for (title, r), (bits, err) in zip(replays, axes):
        stages = [s.stage for s in r.stages]
        xs = range(len(stages))
        for label, get, marker in (
            ("chained", lambda s: s.chained_vs_provider, "o"),
            ("isolated", lambda s: s.isolated_vs_provider, "s"),
        ):
            bits.plot(
                xs, [max(FLOOR, get(s).differ / max(1, get(s).numel)) for s in r.stages], marker=marker, label=label
            )
        for label, get, marker in (
            ("provider (diffusers)", lambda s: s.provider_vs_golden, "o"),
            ("candidate chain", lambda s: s.chained_vs_golden, "s"),
        ):
            err.plot(
                xs,
                [float("nan") if get(s) is None else max(FLOOR, get(s)) for s in r.stages],
                marker=marker,
                label=label,
            )
        for ax, what in (
            (bits, "fraction of elements whose bits differ from the provider"),
            (err, "max|err| / max|FP64|"),
        ):
            ax.set_yscale("log")
            ax.set_xticks(list(xs), stages, rotation=35, ha="right", fontsize=8)
            ax.set_ylabel(what)
            ax.set_title(f"{title}: first drift {r.first_drift or 'none'}" if ax is bits else title)
            if r.first_drift:
                ax.axvline(stages.index(r.first_drift), color=RED, linestyle=":")
            ax.legend(fontsize=7)
    fig.suptitle(f"conditioning chain replay on {report.environment.gpu or 'CPU'} (equal drawn at {FLOOR:g})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_report(report: Report, path: Path) -> None:
    """Draw a report with its kind's drawing (``ReportKind.plot``, a function here); a kind
    without one raises TypeError (its tables say it all)."""
    drawing = kind_of(report).plot
    if drawing is None:
        raise TypeError(f"{report.root.kind} reports have no plot; audit show draws their tables")
    globals()[drawing](report.root, Path(path))


def plot_trajectory(report, path: Path) -> None:
    """Trajectory: per mode and length, max|Δ| / range of the candidate chain's latent against the
    provider's at each step (log scale, equal drawn at FLOOR), the first differing step marked."""
    from .trajectory import Trajectory

    runs = [
        (f"{mode}, length {length}", t)
        for mode, found in report.results.items()
        if not isinstance(found, Unavailable)
        for length, t in found.lengths.items()
        if isinstance(t, Trajectory)
    ]
    fig, axes = plt.subplots(max(1, len(runs)), 1, figsize=(9, 3.5 * max(1, len(runs))), squeeze=False)
    for (title, t), (ax,) in zip(runs, axes):
        ax.plot(range(len(t.steps)), [max(FLOOR, s.rel_max_abs) for s in t.steps], marker="o")
        ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel("max|Δ| / range of the latent")
        ax.set_title(f"{title}: first differs at step {t.first_differ}, {t.trend or 'equal throughout'}")
        if t.first_differ is not None:
            ax.axvline(t.first_differ, color=RED, linestyle=":")
    fig.suptitle(f"denoising trajectory on {report.environment.gpu or 'CPU'} (equal drawn at {FLOOR:g})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
