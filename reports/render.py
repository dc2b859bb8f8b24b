"""Rendering reports as rich tables (terminal) or Markdown (CI job summaries).

Both formats come from one neutral description: a list of sections, each a title, an optional
note and a table whose cells carry a status: ``ok`` (bitwise equal / invariant, green), ``bad``
(differs, red), ``partial`` (forward only, yellow), ``nd`` (not repeatable: nondeterministic,
magenta; never plain red or green) or ``na`` (unavailable, grey, with its reason).

A report is drawn as its verdict table first (``reports.verdict``), then the detail tables, each
pair of candidates once. ``View`` narrows what is drawn: ``only_differ`` hides equal cells (and
rows and tables left empty), ``candidate`` keeps what involves one candidate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .diff import Diff
from .parallel import ParallelReport
from .schema import (
    BitwiseReport,
    CaseComparison,
    ChainReplay,
    ChainReport,
    Cmp,
    PriorArtCandidate,
    PriorArtReport,
    Report,
    Unavailable,
    drifts,
)
from .verdict import Verdict, bitwise_verdicts, pairs, parallel_verdicts, prior_art_verdicts

Status = Literal["ok", "bad", "partial", "nd", "na", "plain"]
STYLE = {"ok": "green", "bad": "red", "partial": "yellow", "nd": "magenta", "na": "grey50", "plain": ""}
MARK = {"ok": "✅ ", "bad": "❌ ", "partial": "🟡 ", "nd": "🔀 ", "na": "➖ ", "plain": ""}
VERDICT_STATUS: dict[str, Status] = {
    "reusable": "ok",
    "batch-invariant": "ok",
    "forward only": "partial",
    "differs": "bad",
    "not invariant": "bad",
    "nondeterministic": "nd",
    "unavailable": "na",
    "bitwise": "ok",
    "bitwise with the fixed-order reduction": "partial",
    "gathered bitwise": "partial",
}


@dataclass(frozen=True)
class View:
    """What to draw: ``only_differ`` hides equal cells; ``candidate`` keeps one candidate's rows."""

    only_differ: bool = False
    candidate: str | None = None

    def keeps(self, *names: str | None) -> bool:
        return self.candidate is None or self.candidate in names


@dataclass
class Cell:
    text: str
    status: Status = "plain"


def unavailable_cell(reason: str) -> Cell:
    return Cell(f"unavailable: {reason}", "na")


@dataclass
class Section:
    title: str
    note: str = ""
    columns: list[str] = field(default_factory=list)
    rows: list[list[Cell]] = field(default_factory=list)


def _cmp_cell(c: Cmp) -> Cell:
    if c.error:
        return Cell(f"error: {c.error}", "bad")
    if c.equal:
        return Cell(f"equal ({c.numel:,})", "nd" if c.repeatable is False else "ok")
    text = f"{c.differ:,}/{c.numel:,} differ, max {c.max_abs:.3g}"
    if c.ulp_max is not None:
        text += f", {c.ulp_max:,} ulp"
    if c.repeatable is False:
        return Cell(f"nondeterministic: {text}; runs differ in {c.repeat_differ:,}", "nd")
    return Cell(text, "bad")


CPU_NOTE = (
    " · CPU run: rl_kernel here is the PyTorch oracle of the kernels' algorithm, not the CUDA kernels, "
    "and CPU results are not GPU results"
)


def verdict_section(found: list[Verdict], view: View, prior_art: bool = False) -> Section:
    """The decision table that comes first."""
    columns = ["mode", "candidate", "verdict", "detail"] if prior_art else ["candidate", "vs", "verdict", "detail"]
    section = Section("verdicts", columns=columns)
    for v in found:
        if not view.keeps(v.candidate, v.reference):
            continue
        lead = v.mode if prior_art else v.candidate
        second = v.candidate if prior_art else (v.reference or "every reference")
        section.rows.append(
            [Cell(lead or ""), Cell(second), Cell(v.verdict, VERDICT_STATUS[v.verdict]), Cell(v.detail)]
        )
    return section


def _visible(row: list[Cell], view: View) -> list[Cell] | None:
    """The row with equal cells blanked under ``only_differ``; None when nothing is left."""
    if not view.only_differ:
        return row
    shown = [row[0]] + [Cell("") if c.status == "ok" else c for c in row[1:]]
    return shown if any(c.text for c in shown[1:]) else None


def bitwise_sections(report: BitwiseReport, view: View = View()) -> list[Section]:
    env = report.environment
    head = Section(
        f"{report.op}: bitwise reuse",
        f"{env.gpu or 'CPU'} · torch {env.torch} · CUDA {env.cuda} · tf32 {env.tf32} · "
        f"rl_kernel {report.rl_kernel_commit[:12]}{' (dirty)' if report.tracked_tree_dirty is True else ''} · "
        f"cases {', '.join(map(str, report.cases))}" + (CPU_NOTE if env.gpu is None else ""),
    )
    sections = [head, verdict_section(bitwise_verdicts(report), view)]
    for name, ref, cases in pairs(report):
        if not view.keeps(name, ref):
            continue
        source = report.results[name].source
        grads = list(dict.fromkeys(g for c in cases.values() if isinstance(c, CaseComparison) for g in c.grads))
        outs = max((len(c.out) for c in cases.values() if isinstance(c, CaseComparison)), default=1)
        out_cols = ["out"] if outs == 1 else [f"out[{i}]" for i in range(outs)]
        section = Section(f"{name} vs {ref}", source, ["case", *out_cols, *(f"d{g}" for g in grads)])
        for case, c in sorted(cases.items(), key=lambda kv: int(kv[0])):
            if isinstance(c, Unavailable):
                row = [Cell(case), unavailable_cell(c.unavailable)]
            else:
                row = [Cell(case), *(_cmp_cell(o) for o in c.out), *[Cell("", "plain")] * (outs - len(c.out))]
                row += [_cmp_cell(c.grads[g]) if g in c.grads else Cell("—", "na") for g in grads]
            if (shown := _visible(row, view)) is not None:
                section.rows.append(shown)
        if section.rows or not view.only_differ:
            sections.append(section)
    return sections


def _invariance_cell(c: PriorArtCandidate) -> Cell:
    bi = c.batch_invariance
    rows = sum(r.fwd_differ + r.rowgrad_differ for r in bi.all_rows.values())
    sub = bi.full_vs_sub_batches.fwd_differ + bi.full_vs_sub_batches.rowgrad_differ
    detail = f"rows {rows}, sub-batches {sub}, sweep {bi.batch_size_sweep.differ}/{bi.batch_size_sweep.comparisons}"
    if not bi.params_repeatable:
        detail += "; parameter gradients not repeatable"
    return Cell(f"{'yes' if bi.batch_invariant else 'no'} ({detail})", "ok" if bi.batch_invariant else "bad")


def prior_art_sections(report: PriorArtReport, view: View = View()) -> list[Section]:
    env = report.environment
    sections = [
        Section(
            f"{report.op}: prior art{' (quick)' if report.quick else ''}",
            f"{env.gpu or 'CPU'} · torch {env.torch} · CUDA {env.cuda} · tf32 {env.tf32}"
            + (f" · Megatron source {env.megatron_source_commit}" if env.megatron_source_commit else "")
            + (CPU_NOTE if env.gpu is None else ""),
        ),
        verdict_section(prior_art_verdicts(report), view, prior_art=True),
    ]
    cols = [
        "candidate",
        "batch-invariant",
        "params repeatable",
        "size",
        "fwd err",
        "worst grad err",
        "fwd µs",
        "fwd+bwd µs",
    ]
    for mode, candidates in report.results.items():
        section = Section(f"mode {mode}", columns=cols)
        if isinstance(candidates, Unavailable):
            section.rows.append([Cell(mode), unavailable_cell(candidates.unavailable)])
            sections.append(section)
            continue
        for name, c in candidates.items():
            if not view.keeps(name):
                continue
            if isinstance(c, Unavailable):
                section.rows.append([Cell(name), unavailable_cell(c.unavailable)])
                continue
            if view.only_differ and c.batch_invariance.batch_invariant:
                continue
            size, acc = max(c.accuracy_latency.items(), key=lambda kv: int(kv[0]))
            worst = max(acc.grad_rel_err.values(), default=0.0)
            repeatable = c.batch_invariance.params_repeatable
            section.rows.append(
                [
                    Cell(name),
                    _invariance_cell(c),
                    Cell("yes" if repeatable else "no", "ok" if repeatable else "bad"),
                    Cell(size),
                    Cell(f"{acc.fwd_rel_err:.3g}"),
                    Cell(f"{worst:.3g}" if c.has_backward else "no backward"),
                    Cell(f"{acc.fwd_us:,.1f}"),
                    Cell(f"{acc.fwd_bwd_us:,.1f}" if c.has_backward else "—"),
                ]
            )
        if section.rows:
            sections.append(section)
    return sections


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
        row = [
            Cell(f"▶ {s.stage} ({', '.join(marks)})", "bad") if marks else Cell(s.stage),
            Cell(name) if name else Cell(f"provider (candidate unavailable: {s.candidate.unavailable})", "na"),
            _cmp_cell(s.chained_vs_provider),
            _cmp_cell(s.isolated_vs_provider),
            *(Cell("—", "na") if e is None else Cell(f"{e:.3g}") for e in (s.chained_vs_golden, s.provider_vs_golden)),
        ]
        if backward:
            row.append(_grads_cell(s.grads or {}))
        if marks or (shown := _visible(row, view)) is not None:
            section.rows.append(row if marks else shown)
    return section


def chain_sections(report: ChainReport, view: View = View()) -> list[Section]:
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


def parallel_sections(report: ParallelReport, view: View = View()) -> list[Section]:
    """Verdicts, then per candidate a case x tensor table for each reduction; reduced tensors are
    marked with a ``Σ``."""
    env = report.environment
    head = Section(
        f"{report.op}: {report.layout} over {report.ranks} ranks ({report.backend}) vs one process",
        f"{env.gpu or 'CPU'} · torch {env.torch} · CUDA {env.cuda} · cases {', '.join(map(str, report.cases))}"
        + "".join(f" · {k}={v}" for k, v in report.nccl_environment.items())
        + (CPU_NOTE if env.gpu is None else ""),
    )
    out = [head, verdict_section(parallel_verdicts(report), view)]
    for name, c in report.results.items():
        if isinstance(c, Unavailable) or not view.keeps(name):
            continue
        for how in ("native", "fixed_order"):
            cases = {k: getattr(v, how) for k, v in c.cases.items()}
            labels = list(dict.fromkeys(t for case in cases.values() for t in case.by_tensor()))
            columns = ["case", *(f"{t} Σ" if t in c.reduced else t for t in labels)]
            section = Section(
                f"{name}, {how.replace('_', '-')} reduction",
                c.source + (f" · stopped: {c.failed}" if c.failed else ""),
                columns,
            )
            for case, comparison in sorted(cases.items(), key=lambda kv: int(kv[0])):
                found = comparison.by_tensor()
                row = [Cell(case), *(_cmp_cell(found[t]) if t in found else Cell("—", "na") for t in labels)]
                if (shown := _visible(row, view)) is not None:
                    section.rows.append(shown)
            if section.rows or not view.only_differ:
                out.append(section)
    return out


SECTIONS = {
    BitwiseReport: bitwise_sections,
    PriorArtReport: prior_art_sections,
    ChainReport: chain_sections,
    ParallelReport: parallel_sections,
}


def sections(report: Report, view: View = View()) -> list[Section]:
    r = report.root
    return SECTIONS[type(r)](r, view)


TERMINAL_ROWS = 1000  # rows per table in the terminal; Markdown and JSON always have every row


def _hidden_note(hidden: list[list[Cell]]) -> str:
    flagged = sum(any(c.status in ("bad", "partial", "nd", "na") for c in row) for row in hidden)
    return (
        f"{len(hidden):,} more rows not shown ({flagged:,} of them differ or are unavailable); "
        "--format markdown or json lists every row"
    )


def _table(s: Section) -> Table:
    """A section as a rich table of at most TERMINAL_ROWS rows. A column is never narrower than its
    longest word, so a number or a name is never broken across lines."""
    shown, hidden = s.rows[:TERMINAL_ROWS], s.rows[TERMINAL_ROWS:]
    note = "\n".join(n for n in (s.note, hidden and _hidden_note(hidden)) if n)
    table = Table(
        title=Text(s.title, style="bold"),
        caption=Text(note, style="dim") if note else None,
        title_justify="left",
        caption_justify="left",
    )
    rows = [row + [Cell("")] * (len(s.columns) - len(row)) for row in shown]
    for i, col in enumerate(s.columns):
        longest = max((len(w) for text in [col, *(r[i].text for r in rows)] for w in text.split()), default=1)
        table.add_column(col, overflow="fold", min_width=longest)
    for row in rows:
        table.add_row(*(Text(c.text, style=STYLE[c.status]) for c in row))
    return table


def to_rich(report: Report, view: View = View()) -> Group:
    return draw_rich(sections(report, view))


def draw_rich(drawn: list[Section]) -> Group:
    parts = []
    for s in drawn:
        if not s.columns:
            parts.append(Text(s.title, style="bold"))
            if s.note:
                parts.append(Text(s.note, style="dim"))
            continue
        parts.append(_table(s))
    return Group(*parts)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def to_markdown(report: Report, view: View = View()) -> str:
    return draw_markdown(sections(report, view))


def draw_markdown(drawn: list[Section]) -> str:
    lines: list[str] = []
    for s in drawn:
        lines.append(f"### {_md_escape(s.title)}")
        if s.note:
            lines.append(f"_{_md_escape(s.note)}_")
        if s.columns:
            lines.append("")
            lines.append("| " + " | ".join(s.columns) + " |")
            lines.append("|" + "---|" * len(s.columns))
            for row in s.rows:
                cells = row + [Cell("")] * (len(s.columns) - len(row))
                lines.append("| " + " | ".join(MARK[c.status] + _md_escape(c.text) for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)


def print_report(report: Report, console: Console | None = None, view: View = View()) -> None:
    (console or Console()).print(to_rich(report, view))


CHANGE_STATUS: dict[str, Status] = {"regression": "bad", "improvement": "ok", "change": "partial", "noise": "nd"}


def diff_sections(diff: Diff) -> list[Section]:
    """The diff as sections: a summary, then per matched report the environment differences, what
    appeared or disappeared, every change of state, and (prior-art) latency ratios NEW / OLD."""
    unknown = [s for s in ("old", "new") if any(s in o.unknown_repeatability for o in diff.ops)]
    notes = [diff.summary()]
    if unknown:
        notes.append(
            f"repeatability unknown in {' and '.join(u.upper() for u in unknown)} (no 'repeatable' fields): "
            "count changes there cannot be told from nondeterminism"
        )
    notes += [f"only in OLD: {p}" for p in diff.only_old] + [f"only in NEW: {p}" for p in diff.only_new]
    out = [Section(f"audit diff {diff.old} → {diff.new}", " · ".join(notes))]
    for op in diff.ops:
        title = f"{op.op} ({op.kind})"
        if op.environment:
            env = Section(f"{title}: environment", columns=["field", "old", "new"])
            env.rows = [[Cell(e.field), Cell(e.old), Cell(e.new)] for e in op.environment]
            out.append(env)
        if op.appeared or op.disappeared:
            moved = Section(f"{title}: appeared or disappeared", columns=["", "what"])
            moved.rows = [[Cell("appeared", "ok"), Cell(a)] for a in op.appeared]
            moved.rows += [[Cell("disappeared", "na"), Cell(d)] for d in op.disappeared]
            out.append(moved)
        changes = Section(
            f"{title}: changes",
            f"{op.old_file} → {op.new_file}",
            ["kind", "candidate", "vs / mode", "case", "tensor", "old", "new"],
        )
        changes.rows = [
            [
                Cell(c.kind, CHANGE_STATUS[c.kind]),
                Cell(c.candidate),
                Cell(c.reference or ""),
                Cell(c.case or ""),
                Cell(c.tensor or ""),
                Cell(c.old),
                Cell(c.new),
            ]
            for c in sorted(op.changes, key=lambda c: list(CHANGE_STATUS).index(c.kind))
        ]
        if not changes.rows:
            changes.rows = [[Cell("none", "ok"), Cell("no comparison changed state")]]
        out.append(changes)
        if op.latency:
            lat = Section(f"{title}: latency NEW / OLD", columns=["mode", "candidate", "size", "fwd", "fwd+bwd"])
            lat.rows = [
                [
                    Cell(x.mode),
                    Cell(x.candidate),
                    Cell(x.size),
                    Cell(f"{x.fwd_ratio:.2f}×"),
                    Cell(f"{x.fwd_bwd_ratio:.2f}×"),
                ]
                for x in op.latency
            ]
            out.append(lat)
    return out
