"""Pictures of reports (matplotlib, the ``plot`` extra).

Prior-art: latency against rows (log-log), error against FP64 (bars), and each implementation's
verdict (green invariant, red not). Bitwise: a candidate x case grid per reference: green where
every bit is equal, otherwise coloured on a log scale by the fraction of elements (output and
gradients together) whose bits differ, so any difference shows; candidates and cases that could
not run are grey, their reasons listed below the grid. Chain replay: per mode and
length, the fraction of each stage's output whose bits differ from the provider's (chained and
isolated) and each stage's error against FP64 (provider and candidate chain), on log scales.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.cm import ScalarMappable  # noqa: E402
from matplotlib.colors import LinearSegmentedColormap, LogNorm  # noqa: E402

from .bitwise import BitwiseReport  # noqa: E402
from .chain import ChainMode, ChainReplay, ChainReport  # noqa: E402
from .kinds import Report, kind_of  # noqa: E402
from .prior_art import PriorArtCandidate  # noqa: E402
from .schema import Unavailable  # noqa: E402

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


EQUAL_TEXT = "equal"
DIFFER = LinearSegmentedColormap.from_list("differ", ["#fdd835", "#fb8c00", RED])  # never green
FRACTION_FLOOR = 1e-9  # the log colour scale starts here; any smaller fraction gets its colour


@dataclass
class GridCell:
    """One candidate x case cell: ``fraction`` of elements whose bits differ (0.0: equal), or
    None with the ``reason`` it could not run."""

    fraction: float | None
    differ: int = 0
    reason: str = ""


def bitwise_grids(report: BitwiseReport) -> dict[str, dict[str, dict[str, GridCell]]]:
    """reference -> candidate -> case -> cell. A candidate that is unavailable as a whole is in
    every reference's grid, each of its cells carrying its reason."""
    refs = sorted({vs for r in report.results.values() for vs in (getattr(r, "__pydantic_extra__", None) or {})})
    grids: dict[str, dict[str, dict[str, GridCell]]] = {vs: {} for vs in refs}
    for name, result in report.results.items():
        if isinstance(result, Unavailable):
            for vs in refs:
                grids[vs][name] = {str(c): GridCell(None, reason=result.unavailable) for c in report.cases}
            continue
        for vs, cases in (result.__pydantic_extra__ or {}).items():
            row = grids[vs].setdefault(name, {})
            for case, c in cases.items():
                if isinstance(c, Unavailable):
                    row[case] = GridCell(None, reason=c.unavailable)
                    continue
                cmps = [*c.out, *c.grads.values()]
                differ = sum(x.differ for x in cmps)
                row[case] = GridCell(differ / max(1, sum(x.numel for x in cmps)), differ)
    return grids


def cell_colour(cell: GridCell) -> str | tuple:
    """Green only for equal, grey for unavailable; any difference, however small, on a log scale
    from yellow (a fraction of 1e-9 or less) to red (every element)."""
    if cell.fraction is None:
        return GREY
    if cell.fraction == 0:
        return GREEN
    return DIFFER(LogNorm(FRACTION_FLOOR, 1.0, clip=True)(max(cell.fraction, FRACTION_FLOOR)))


def _cell_text(cell: GridCell) -> str:
    if cell.fraction is None:
        return "n/a"
    return EQUAL_TEXT if cell.fraction == 0 else f"{cell.differ:,} differ\n({cell.fraction:.2g})"


def plot_bitwise(report: BitwiseReport, path: Path) -> None:
    grids = bitwise_grids(report)
    cases = [str(c) for c in report.cases]
    reasons = sorted(
        {
            " ".join(f"{name}: {cell.reason}".split())[:160]
            for cands in grids.values()
            for name, row in cands.items()
            for cell in row.values()
            if cell.fraction is None
        }
    )
    fig, axes = plt.subplots(
        1, max(1, len(grids)), figsize=(6 * max(1, len(grids)), 1.5 + 0.5 * len(report.results)), squeeze=False
    )
    for ax, (vs, cands) in zip(axes[0], grids.items()):
        names = sorted(cands)
        for i, name in enumerate(names):
            for j, case in enumerate(cases):
                cell = cands[name].get(case, GridCell(None, reason="not run"))
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, color=cell_colour(cell)))
                ax.text(j, i, _cell_text(cell), ha="center", va="center", fontsize=7)
        ax.set_xlim(-0.5, len(cases) - 0.5)
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.set_xticks(range(len(cases)), cases)
        ax.set_yticks(range(len(names)), names, fontsize=7)
        ax.set_xlabel("case (rows)")
        ax.set_title(vs)
    scale = fig.colorbar(ScalarMappable(LogNorm(FRACTION_FLOOR, 1.0), DIFFER), ax=axes[0].tolist(), fraction=0.03)
    scale.set_label("fraction of elements that differ (green: equal, grey: n/a)")
    if reasons:
        fig.text(0.01, 0.0, "n/a: " + "\n".join(reasons), fontsize=6, va="top", color="#616161")
    fig.suptitle(f"{report.op}: elements whose bits differ, on {report.environment.gpu or 'CPU'}")
    fig.savefig(path, dpi=110, bbox_inches="tight")
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
