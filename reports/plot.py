"""Pictures of reports (matplotlib, the ``plot`` extra).

Prior-art: latency against rows (log-log), error against FP64 (bars), and each implementation's
verdict (green invariant, red not). Bitwise: a candidate x case grid per reference, coloured by the
fraction of elements (output and gradients together) whose bits differ. Chain replay: per mode and
length, the fraction of each stage's output whose bits differ from the provider's (chained and
isolated) and each stage's error against FP64 (provider and candidate chain), on log scales.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.colors import LinearSegmentedColormap  # noqa: E402

from .schema import BitwiseReport, CaseComparison, ChainMode, ChainReplay, ChainReport, PriorArtCandidate, Report  # noqa: E402

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
    acc.barh([y + 0.2 for y in ys], [max(a.grad_rel_err.values(), default=0.0) for a in largest], height=0.4,
             label="worst gradient")
    acc.set_yticks(list(ys), names, fontsize=7)
    acc.set_xlabel("max|err| / max|ref| vs FP64 (largest size)")
    acc.set_title("error against FP64")
    acc.legend(fontsize=7)
    colours = [GREEN if c.batch_invariance.batch_invariant else RED for _, c in rows]
    verdict.barh(list(ys), [1] * len(rows), color=colours)
    for y, (_, c) in zip(ys, rows):
        verdict.text(0.5, y, "invariant" if c.batch_invariance.batch_invariant else "NOT invariant",
                     ha="center", va="center", color="white", fontsize=8)
    verdict.set_yticks(list(ys), names, fontsize=7)
    verdict.set_xticks([])
    verdict.set_title("batch invariance")
    fig.suptitle(f"{report.op}: prior art{' (quick)' if report.quick else ''} on {report.environment.gpu or 'CPU'}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_bitwise(report: BitwiseReport, path: Path) -> None:
    grids = {}  # reference -> candidate -> case -> fraction differing (None: unavailable)
    for name, result in report.results.items():
        for vs, cases in (getattr(result, "__pydantic_extra__", None) or {}).items():
            for case, c in cases.items():
                frac = None
                if isinstance(c, CaseComparison):
                    cmps = [*c.out, *c.grads.values()]
                    frac = sum(x.differ for x in cmps) / max(1, sum(x.numel for x in cmps))
                grids.setdefault(vs, {}).setdefault(name, {})[case] = frac
    cases = [str(c) for c in report.cases]
    cmap = LinearSegmentedColormap.from_list("differ", [GREEN, "#fdd835", RED])
    cmap.set_bad(GREY)
    fig, axes = plt.subplots(1, max(1, len(grids)), figsize=(6 * max(1, len(grids)), 1 + 0.5 * len(report.results)),
                             squeeze=False)
    for ax, (vs, cands) in zip(axes[0], sorted(grids.items())):
        names = sorted(cands)
        data = [[cands[n].get(c) for c in cases] for n in names]
        masked = [[float("nan") if v is None else v for v in row] for row in data]
        ax.imshow(masked, cmap=cmap, vmin=0, vmax=1, aspect="auto")
        for i, row in enumerate(data):
            for j, v in enumerate(row):
                ax.text(j, i, "n/a" if v is None else ("equal" if v == 0 else f"{v:.1%}"), ha="center", va="center",
                        fontsize=7)
        ax.set_xticks(range(len(cases)), cases)
        ax.set_yticks(range(len(names)), names, fontsize=7)
        ax.set_xlabel("case (rows)")
        ax.set_title(vs)
    fig.suptitle(f"{report.op}: fraction of elements whose bits differ, on {report.environment.gpu or 'CPU'}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


FLOOR = 1e-12  # zero (bitwise equal, or exact) drawn on the log scale's floor


def plot_chain(report: ChainReport, path: Path) -> None:
    replays = [(f"{mode}, length {length}", r) for mode, found in report.results.items() if isinstance(found, ChainMode)
               for length, r in found.lengths.items() if isinstance(r, ChainReplay)]
    fig, axes = plt.subplots(max(1, len(replays)), 2, figsize=(15, 4 * max(1, len(replays))), squeeze=False)
    for (title, r), (bits, err) in zip(replays, axes):
        stages = [s.stage for s in r.stages]
        xs = range(len(stages))
        for label, get, marker in (("chained", lambda s: s.chained_vs_provider, "o"),
                                   ("isolated", lambda s: s.isolated_vs_provider, "s")):
            bits.plot(xs, [max(FLOOR, get(s).differ / max(1, get(s).numel)) for s in r.stages], marker=marker, label=label)
        for label, get, marker in (("provider (diffusers)", lambda s: s.provider_vs_golden, "o"),
                                   ("candidate chain", lambda s: s.chained_vs_golden, "s")):
            err.plot(xs, [float("nan") if get(s) is None else max(FLOOR, get(s)) for s in r.stages], marker=marker, label=label)
        for ax, what in ((bits, "fraction of elements whose bits differ from the provider"), (err, "max|err| / max|FP64|")):
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
    r = report.root
    if isinstance(r, ChainReport):
        plot_chain(r, Path(path))
        return
    (plot_bitwise if isinstance(r, BitwiseReport) else plot_prior_art)(r, Path(path))
