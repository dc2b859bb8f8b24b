"""Rendering reports as rich tables (terminal) or Markdown (CI job summaries).

Both formats come from one neutral description: a list of sections, each a title, an optional
note and a table whose cells carry a status: ``ok`` (bitwise equal / invariant, green), ``bad``
(differs, red) or ``na`` (unavailable, grey, with its reason).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .schema import BitwiseReport, CaseComparison, Cmp, PriorArtCandidate, PriorArtReport, Report, Unavailable

Status = Literal["ok", "bad", "na", "plain"]
STYLE = {"ok": "green", "bad": "red", "na": "grey50", "plain": ""}
MARK = {"ok": "✅ ", "bad": "❌ ", "na": "➖ ", "plain": ""}


@dataclass
class Cell:
    text: str
    status: Status = "plain"


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
        return Cell(f"equal ({c.numel:,})", "ok")
    return Cell(f"{c.differ:,}/{c.numel:,} differ, max {c.max_abs:.3g}", "bad")


CPU_NOTE = (" · CPU run: rl_kernel here is the PyTorch oracle of the kernels' algorithm, not the CUDA kernels, "
            "and CPU results are not GPU results")


def bitwise_sections(report: BitwiseReport) -> list[Section]:
    env = report.environment
    head = Section(
        f"{report.op}: bitwise reuse",
        f"{env.gpu or 'CPU'} · torch {env.torch} · CUDA {env.cuda} · tf32 {env.tf32} · "
        f"rl_kernel {report.rl_kernel_commit[:12]}{' (dirty)' if report.tracked_tree_dirty is True else ''} · "
        f"cases {', '.join(map(str, report.cases))}" + (CPU_NOTE if env.gpu is None else ""),
    )
    sections = [head]
    for name, result in report.results.items():
        if isinstance(result, Unavailable):
            head.rows.append([Cell(name), Cell(f"unavailable: {result.unavailable}", "na")])
            continue
        for vs, cases in (result.__pydantic_extra__ or {}).items():
            grads = list(dict.fromkeys(g for c in cases.values() if isinstance(c, CaseComparison) for g in c.grads))
            outs = max((len(c.out) for c in cases.values() if isinstance(c, CaseComparison)), default=1)
            out_cols = ["out"] if outs == 1 else [f"out[{i}]" for i in range(outs)]
            section = Section(f"{name} {vs}", result.source, ["case", *out_cols, *(f"d{g}" for g in grads)])
            for case, c in sorted(cases.items(), key=lambda kv: int(kv[0])):
                if isinstance(c, Unavailable):
                    section.rows.append([Cell(case), Cell(f"unavailable: {c.unavailable}", "na")])
                    continue
                cells = [_cmp_cell(o) for o in c.out] + [Cell("", "plain")] * (outs - len(c.out))
                cells += [_cmp_cell(c.grads[g]) if g in c.grads else Cell("—", "na") for g in grads]
                section.rows.append([Cell(case), *cells])
            sections.append(section)
    if head.rows:
        head.columns = ["candidate", "status"]
    return sections


def _invariance_cell(c: PriorArtCandidate) -> Cell:
    bi = c.batch_invariance
    rows = sum(r.fwd_differ + r.rowgrad_differ for r in bi.all_rows.values())
    sub = bi.full_vs_sub_batches.fwd_differ + bi.full_vs_sub_batches.rowgrad_differ
    detail = f"rows {rows}, sub-batches {sub}, sweep {bi.batch_size_sweep.differ}/{bi.batch_size_sweep.comparisons}"
    if not bi.params_repeatable:
        detail += "; parameter gradients not repeatable"
    return Cell(f"{'yes' if bi.batch_invariant else 'no'} ({detail})", "ok" if bi.batch_invariant else "bad")


def prior_art_sections(report: PriorArtReport) -> list[Section]:
    env = report.environment
    sections = [
        Section(
            f"{report.op}: prior art{' (quick)' if report.quick else ''}",
            f"{env.gpu or 'CPU'} · torch {env.torch} · CUDA {env.cuda} · tf32 {env.tf32}"
            + (f" · Megatron source {env.megatron_source_commit}" if env.megatron_source_commit else "")
            + (CPU_NOTE if env.gpu is None else ""),
        )
    ]
    cols = ["candidate", "batch-invariant", "params repeatable", "size", "fwd err", "worst grad err", "fwd µs", "fwd+bwd µs"]
    for mode, candidates in report.results.items():
        section = Section(f"mode {mode}", columns=cols)
        if isinstance(candidates, Unavailable):
            section.rows.append([Cell(mode), Cell(f"unavailable: {candidates.unavailable}", "na")])
            sections.append(section)
            continue
        for name, c in candidates.items():
            if isinstance(c, Unavailable):
                section.rows.append([Cell(name), Cell(f"unavailable: {c.unavailable}", "na")])
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
        sections.append(section)
    return sections


def sections(report: Report) -> list[Section]:
    r = report.root
    return bitwise_sections(r) if isinstance(r, BitwiseReport) else prior_art_sections(r)


TERMINAL_ROWS = 1000  # rows per table in the terminal; Markdown and JSON always have every row


def _hidden_note(hidden: list[list[Cell]]) -> str:
    flagged = sum(any(c.status in ("bad", "na") for c in row) for row in hidden)
    return (f"{len(hidden):,} more rows not shown ({flagged:,} of them differ or are unavailable); "
            "--format markdown or json lists every row")


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


def to_rich(report: Report) -> Group:
    parts = []
    for s in sections(report):
        if not s.columns:
            parts.append(Text(s.title, style="bold"))
            if s.note:
                parts.append(Text(s.note, style="dim"))
            continue
        parts.append(_table(s))
    return Group(*parts)


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def to_markdown(report: Report) -> str:
    lines: list[str] = []
    for s in sections(report):
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


def print_report(report: Report, console: Console | None = None) -> None:
    (console or Console()).print(to_rich(report))
