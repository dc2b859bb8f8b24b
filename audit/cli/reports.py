"""The report commands: ``show``, ``diff``, ``validate``, ``schema`` and ``plot``. They read reports
through ``reports.io`` and import no torch."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from audit.cli import checks
from audit.cli.app import app, console, err
from audit.cli.options import (
    AllowDifferentProblemOpt,
    AllowMissingOpt,
    Format,
    FormatOpt,
    HtmlOpt,
    JunitOpt,
    MaxSizeOpt,
)
from reports.hints import install_hint
from reports.io import MAX_REPORT_MB
from reports.kinds import kind_names

PLOT_INSTALL = install_hint("matplotlib is not installed")


def _load_or_exit(path: Path, max_size: float):
    """The validated report at ``path``; otherwise one line on stderr and exit status 2."""
    from reports.io import ReportError, load_report

    try:
        return load_report(path, max_size)
    except ReportError as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(2)


@app.command()
def plot(
    file: Annotated[Path, typer.Argument(help="A report of either kind.")],
    out: Annotated[Optional[Path], typer.Option(help="PNG to write. Default: the report's name with .png.")] = None,
    max_size: MaxSizeOpt = MAX_REPORT_MB,
) -> None:
    """Draw a report (needs matplotlib: pip install '.[plot]'). Prior-art: latency against rows
    (log-log), error against FP64, and each implementation's verdict. Bitwise: per pair of
    candidates, the output and each gradient by case, coloured by the share of elements that
    differ; chain replay: per stage, the share that differs and the error against FP64."""
    report = _load_or_exit(file, max_size)
    try:
        from reports.plot import plot_report
    except ImportError as exc:
        err.print(f"[red]audit plot needs matplotlib ({escape(str(exc))}); {escape(PLOT_INSTALL)}[/]")
        raise typer.Exit(2)
    from audit.cli.paths import OutputPathError, file_target

    try:
        target = file_target(out or file.with_suffix(".png"), ".png")
    except OutputPathError as exc:
        raise checks.usage_error(f"--out: {exc}") from None
    target.parent.mkdir(parents=True, exist_ok=True)  # as run --out does
    try:
        plot_report(report, target)
    except TypeError as exc:  # a kind without a plot
        raise checks.usage_error(str(exc)) from None
    console.print(f"wrote {escape(str(target))}")


@app.command()
def show(
    files: Annotated[list[Path], typer.Argument(help="Report files of either kind.")],
    format: FormatOpt = Format.table,
    only_differ: Annotated[
        bool, typer.Option("--only-differ", help="Hide equal cells, and rows and tables left empty.")
    ] = False,
    candidate: Annotated[
        Optional[str],
        typer.Option("--candidate", help="Show only what involves this candidate (e.g. liger, diffusers[sglang])."),
    ] = None,
    kernels: Annotated[
        bool,
        typer.Option(
            "--kernels",
            help="Also show each candidate's kernel fingerprints (bitwise reports): per case, the CUDA kernels "
            "(on a CPU, the operators) its forward and its backward pass ran, with launch counts.",
        ),
    ] = False,
    timing: Annotated[
        bool,
        typer.Option(
            "--timing",
            help="Also show where each mode process's time went (bitwise and prior-art reports): wall time "
            "from spawn to end, and start, imports, setup, build, inputs, waiting, compute, comparison, writing, "
            "kernels and exit, each with its share.",
        ),
    ] = False,
    max_size: MaxSizeOpt = MAX_REPORT_MB,
) -> None:
    """Render reports: the verdict table first (one line per candidate and reference, each pair
    once, unavailable ones last), then the detail tables (bitwise: per case and tensor; prior-art:
    per mode). --format json prints one document for every file (its schema: audit schema --kind
    verdicts): per report its path, kind, op, verdicts and detail tables."""
    from reports.kinds import kind_of
    from reports.render import View, print_report, to_markdown
    from reports.show_json import ShowDocument, report_out

    view = View(only_differ=only_differ, candidate=candidate, kernels=kernels, timing=timing)
    document = ShowDocument(reports=[])
    for path in files:
        report = _load_or_exit(path, max_size)
        if candidate is not None and candidate not in kind_of(report).candidates(report.root):
            err.print(f"[red]{escape(str(path))}: no candidate {escape(candidate)!r}[/]")
            raise typer.Exit(2)
        if format is Format.table:
            print_report(report, console, view)
        elif format is Format.markdown:
            typer.echo(to_markdown(report, view))
        else:
            document.reports.append(report_out(str(path), report, view))
    if format is Format.json:
        typer.echo(document.model_dump_json(indent=2))


@app.command()
def report(
    paths: Annotated[list[Path], typer.Argument(help="Report files or directories of reports, of any kinds.")],
    html: HtmlOpt,
    baseline: Annotated[
        Optional[Path],
        typer.Option(
            "--baseline", help="Reports (a file or a directory) to diff PATHs against; the page shows the diff."
        ),
    ] = None,
    max_size: MaxSizeOpt = MAX_REPORT_MB,
) -> None:
    """Write one self-contained HTML page of reports of any kinds: the verdicts first, then per
    report a grid of every comparison by case (or stage, step), coloured as the verdicts are
    decided, the detail tables (a click on a comparison shows its counts, ULP histogram, first
    differing index and repeatability), the chain's and trajectory's drift per stage or step and
    the environment; with --baseline, the diff. Tables sort and filter in the page. A PATH that
    cannot be read is named on stderr and in the page, the others are drawn, and the exit status is
    2; so is an unusable --html or --baseline, before anything is read. Exit 3: the page could not
    be written."""
    from audit.cli.paths import OutputPathError, file_target
    from audit.cli.session import WRITE_FAILED
    from reports.diff import DiffInputError, diff_sets
    from reports.html import render_html
    from reports.io import ReportError, load_each, load_set, write_text

    try:
        target = file_target(html, ".html")
    except OutputPathError as exc:
        raise checks.usage_error(f"--html: {exc}") from None
    try:
        old = load_set(baseline, max_size) if baseline is not None else None
    except ReportError as exc:
        raise checks.usage_error(f"--baseline: {exc}") from None
    loaded, problems = load_each(paths, max_size)
    for problem in problems:
        err.print(f"[red]not rendered: {escape(str(problem))}[/]")
    if not loaded:
        raise checks.usage_error("no readable report among " + ", ".join(map(str, paths)))
    found = None
    if old is not None:
        try:
            found = diff_sets(old, _one_per_key(loaded), old_name=str(baseline), new_name=", ".join(map(str, paths)))
        except DiffInputError as exc:
            raise checks.usage_error(f"--baseline: {exc}") from None
    try:
        write_text(target, render_html(loaded, unreadable=[str(p) for p in problems], diff=found))
    except OSError as exc:
        err.print(f"[red]error: cannot write {escape(str(target))}: {escape(exc.strerror or str(exc))}[/]")
        raise typer.Exit(WRITE_FAILED)
    console.print(f"wrote {escape(str(target))}: {len(loaded)} report{'s' if len(loaded) != 1 else ''}")
    if problems:
        raise typer.Exit(2)


def _one_per_key(loaded: list) -> dict:
    """The reports as a set for ``reports.diff``; two with one key (kind, op, ...) are a usage error."""
    from reports.kinds import kind_of

    found: dict = {}
    for path, report in loaded:
        key = kind_of(report).key(report.root)
        if key in found:
            raise checks.usage_error(
                f"--baseline: {found[key][0]} and {path} are both {key[0]} reports for {key[1]}: give one of them"
            )
        found[key] = (path, report)
    return found


@app.command()
def diff(
    old: Annotated[Path, typer.Argument(help="Earlier reports: a file or a directory.")],
    new: Annotated[Path, typer.Argument(help="Later reports of the same kind: a file or a directory.")],
    format: FormatOpt = Format.table,
    allow_missing: AllowMissingOpt = None,
    allow_different_problem: AllowDifferentProblemOpt = False,
    max_size: MaxSizeOpt = MAX_REPORT_MB,
    junit: JunitOpt = None,
) -> None:
    """What changed from OLD to NEW, matched by report kind and op: environment (GPU, torch, CUDA,
    libraries, mode variables), what appeared, what was lost (a report, mode, candidate, case or
    tensor comparison of OLD that NEW lacks), and each change of state, classified by the table in
    the README's "Deciding": e.g. equal->differ and available->unavailable are regressions, the
    reverse improvements, a changed count of differing elements a change, and a change between
    non-repeatable states noise. Prior-art: invariant->not invariant is a regression; latency
    NEW/OLD per size. Exit 0: no regression and nothing lost that --allow-missing does not name;
    1: a regression or such a loss (the first one named on stderr); 2: unusable input (also
    reports of different problems: other settings, or other inputs for a case both ran).
    --junit: a test case per verdict and comparison of NEW and per change and loss, failing
    exactly on what makes the exit status 1."""
    from audit.cli.session import junit_path, write_junit
    from reports.diff import DiffInputError, diff_sets
    from reports.io import ReportError, load_set
    from reports.render import diff_sections, draw_markdown, draw_rich

    junit = junit_path(junit)
    try:
        later = load_set(new, max_size)
        found = diff_sets(
            load_set(old, max_size),
            later,
            old_name=str(old),
            new_name=str(new),
            allow_missing=allow_missing,
            allow_different_problem=allow_different_problem,
        )
    except (DiffInputError, ReportError) as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(2)
    if format is Format.table:
        console.print(draw_rich(diff_sections(found)))
    elif format is Format.markdown:
        typer.echo(draw_markdown(diff_sections(found)))
    else:
        typer.echo(found.model_dump_json(indent=2))
    if junit is not None:
        from reports.junit import junit_xml

        write_junit(junit, junit_xml(list(later.values()), fail_on="regression", diff=found))
    if found.regressed:
        err.print(f"[red]exit 1: {escape(str(found.first_failure()))}[/]")
        raise typer.Exit(1)


@app.command()
def validate(
    files: Annotated[list[Path], typer.Argument(help="Report files to check against the schema.")],
    max_size: MaxSizeOpt = MAX_REPORT_MB,
) -> None:
    """Exit 0 when every file is a valid report; otherwise exit 1 naming each offending field by its
    JSON path. A path that names nothing is a usage error: exit 2 before any file is read."""
    from reports.io import ReportError, load_report
    from reports.schema import listed

    missing = [str(path) for path in files if not os.path.lexists(path)]
    if missing:
        raise checks.usage_error(f"no such file: {listed(missing)}")
    bad = False
    for path in files:
        try:
            report = load_report(path, max_size)
        except ReportError as exc:
            bad = True
            for where, msg in exc.problems:
                err.print(f"[red]{escape(str(path))}[/]: {escape(where)}: {escape(msg)}")
            continue
        console.print(f"[green]{escape(str(path))}[/]: valid {report.root.kind} report for {escape(report.root.op)}")
    if bad:
        raise typer.Exit(1)


DOCUMENTS = {"verdicts": "audit show --format json", "diff": "audit diff --format json"}


@app.command()
def schema(
    kind: Annotated[
        Optional[str],
        typer.Option(
            help=f"A report kind ({', '.join(kind_names())}), or the document of "
            + ", ".join(f"{name} ({what})" for name, what in DOCUMENTS.items())
            + "; default: any report."
        ),
    ] = None,
) -> None:
    """Print the JSON Schema generated from the pydantic models: of a report, or of what show and
    diff print with --format json."""
    from reports.kinds import json_schema

    if kind is not None:
        checks.check_names("kind", [kind], [*kind_names(), *DOCUMENTS])
    if kind == "verdicts":
        from reports.show_json import ShowDocument

        found = ShowDocument.model_json_schema()
    elif kind == "diff":
        from reports.diff import diff_json_schema

        found = diff_json_schema()
    else:
        found = json_schema(kind)
    typer.echo(json.dumps(found, indent=2))
