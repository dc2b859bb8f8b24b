"""The skeleton of every command that computes and writes reports (``run``, ``prior-art``, ``chain``,
``parallel``): the same checks first, then the same progress, signals, writes, summary and gate.

Contract:
- Before any work: ``report_paths`` checks ``--out``, ``junit_path`` checks ``--junit`` and
  ``load_baseline`` loads ``--baseline``, all three before torch is imported; ``gate_for`` then
  checks the baseline against the run. A problem with any is one line and exit 2, and so is a
  baseline of a different problem (``reports.diff``) where the command gives its settings
  (``chain``); otherwise that is found after the run: one line and exit 2, the reports written.
- ``execute`` computes each ``Work`` under one progress bar (units, elapsed time, ETA), writes its
  report atomically as soon as it is done, then prints the reports (unless quiet), one "wrote"
  line each, the diff against the baseline, the closing summary (one line per report with its
  verdict counts, a recap across reports, the diff's counts), writes the JUnit file when asked
  (``reports.junit``: its failures are the gate's), and exits 1 when the gate fails
  (``reports.diff.gate``), one line per reason, each naming the first failing comparison.
- Ctrl-C and SIGTERM stop the workers (``audit.parent.launch`` kills every process they started
  and removes its temporary directories), name the reports already written and exit 130 or 143.
  A report or JUnit file that cannot be written (disk full, a read-only file system) is one line
  naming the path and the error, exit 3; what was written before stays.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from audit.cli.app import console, err
from audit.cli.checks import usage_error
from audit.cli.options import FailOn
from reports.io import MAX_REPORT_MB

if TYPE_CHECKING:
    from reports.kinds import ReportSet

Advance = Callable[[str], None]
WRITE_FAILED = 3


class Terminated(BaseException):
    """Raised in the main thread when SIGTERM arrives (a BaseException, like KeyboardInterrupt, so
    that only the handlers meant for it catch it and every ``finally`` still runs)."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated()


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """Within the block SIGTERM raises Terminated; the previous handler is restored after it."""
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def report_paths(out: Optional[Path], names: list[str], kind: str) -> dict[str, Path]:
    """name -> the report file it is written to (``audit.cli.paths.report_paths``); an unusable
    ``--out`` is a usage error."""
    from audit.cli.paths import OutputPathError
    from audit.cli.paths import report_paths as paths

    try:
        return paths(out, names, kind)
    except OutputPathError as exc:
        raise usage_error(f"--out: {exc}") from None


def junit_path(junit: Optional[Path]) -> Optional[Path]:
    """The file ``--junit`` names (``audit.cli.paths.file_target``, ``.xml``); an unusable one is a
    usage error."""
    from audit.cli.paths import OutputPathError, file_target

    if junit is None:
        return None
    try:
        return file_target(junit, ".xml")
    except OutputPathError as exc:
        raise usage_error(f"--junit: {exc}") from None


def write_junit(path: Path, text: str) -> None:
    """Write the JUnit file atomically and say so on stderr (stdout may be a JSON document); a write
    error is one line and exit 3."""
    from reports.io import write_text

    try:
        write_text(path, text)
    except OSError as exc:
        err.print(f"[red]error: cannot write {escape(str(path))}: {escape(exc.strerror or str(exc))}[/]")
        raise typer.Exit(WRITE_FAILED)
    err.print(f"wrote {escape(str(path))}")


@dataclass(frozen=True, kw_only=True)
class Gate:
    """The baseline set (loaded before anything runs) and what makes the run fail:
    ``fail_on``, the ``--candidate`` names that must run (``requested``), the names whose loss
    against the baseline was intended (``allow_missing``), and whether a baseline of a different
    problem is compared anyway."""

    baseline: Optional[ReportSet]
    name: str
    fail_on: str
    requested: list[str] = field(default_factory=list)
    allow_missing: list[str] = field(default_factory=list)
    allow_different_problem: bool = False


def _chosen(fail_on: Optional[FailOn], baselined: bool) -> str:
    """What fails the run: --fail-on's value, else regression with a baseline and nothing without."""
    return fail_on.value if fail_on else ("regression" if baselined else "none")


@dataclass(frozen=True)
class Baseline:
    """The reports of --baseline (``load_baseline``) and where they came from."""

    path: Path
    reports: ReportSet


def load_baseline(
    baseline: Optional[Path],
    fail_on: Optional[FailOn],
    *,
    allow_missing: Optional[list[str]] = None,
    max_size: float = MAX_REPORT_MB,
) -> Optional[Baseline]:
    """Load --baseline (at most ``max_size`` MiB a file), or None without one. Reads reports only
    (no torch), so a command calls it among its first checks: an unusable baseline, --fail-on
    regression or kernel-change without one, and --allow-missing without one exit 2 at once."""
    from reports.io import ReportError, load_set

    chosen = _chosen(fail_on, baseline is not None)
    if baseline is None:
        if chosen in ("regression", "kernel-change"):
            raise typer.BadParameter(f"--fail-on {chosen} needs --baseline", param_hint="--fail-on")
        if allow_missing:
            raise typer.BadParameter("--allow-missing needs --baseline", param_hint="--allow-missing")
        return None
    try:
        return Baseline(baseline, load_set(baseline, max_size))
    except ReportError as exc:
        raise typer.BadParameter(str(exc), param_hint="--baseline") from None


def gate_for(
    baseline: Optional[Baseline],
    fail_on: Optional[FailOn],
    *,
    kind: str,
    names: list[str],
    quick: bool = False,
    requested: Optional[list[str]] = None,
    allow_missing: Optional[list[str]] = None,
    allow_different_problem: bool = False,
    problem: Optional[dict[str, object]] = None,
) -> Gate:
    """The gate of a run about to start, checked against the loaded baseline before any
    computation: a baseline with no ``kind`` report for ``names`` exits 2, and so does a baseline
    report whose kind's ``problem`` differs from ``problem`` (the settings of the run), unless
    ``allow_different_problem``, and --fail-on kernel-change against a baseline report without
    kernel fingerprints."""
    from reports.diff import baselined_ops, different_problem, problem_differences, unfingerprinted
    from reports.kinds import KINDS

    chosen = _chosen(fail_on, baseline is not None)
    options = dict(
        fail_on=chosen,
        requested=list(requested or []),
        allow_missing=list(allow_missing or []),
        allow_different_problem=allow_different_problem,
    )
    if baseline is None:
        return Gate(baseline=None, name="", **options)
    found, path = baseline.reports, baseline.path
    covered = baselined_ops(found, kind, names, quick)
    if not covered:
        raise typer.BadParameter(
            f"{path} holds no {kind} report for {', '.join(names)}" + (" (quick)" if quick else ""),
            param_hint="--baseline",
        )
    if problem is not None and not allow_different_problem:
        for name in covered:
            where, report = found[(kind, name, quick)]
            differs = problem_differences(KINDS[kind].problem(report.root), problem)
            if differs:
                why = different_problem(kind, differs, old=where, new="this run")
                raise typer.BadParameter(str(why), param_hint="--baseline")
    bare = unfingerprinted(found, [(kind, n, quick) for n in covered]) if chosen == "kernel-change" else []
    if bare:
        raise typer.BadParameter(
            f"the baseline has no kernel fingerprints ({', '.join(bare)}); --fail-on kernel-change compares them",
            param_hint="--baseline",
        )
    missing = [n for n in names if n not in covered]
    if missing:
        err.print(f"[yellow]--baseline has no {kind} report for {escape(', '.join(missing))}: not gated[/]")
    return Gate(baseline=found, name=str(path), **options)


@dataclass(frozen=True)
class Work:
    """One report to compute: ``compute(advance)`` returns its data, calling ``advance(what)`` once
    per finished unit; ``total`` units in all."""

    label: str
    total: int
    path: Path
    compute: Callable[[Advance], dict]


def execute(
    works: list[Work],
    *,
    unit: str,
    gate: Gate,
    quiet: bool,
    junit: Optional[Path] = None,
    workers: AbstractContextManager = nullcontext(),
) -> None:
    """Compute, write, print and gate ``works`` as the module says; ``junit``: the checked
    ``--junit`` file (``junit_path``); ``workers``: what owns worker processes across the works
    (``audit.parent.runner.Runner``), closed when the computation ends, however it ends."""
    from reports.diff import DiffInputError
    from reports.diff import gate as decide
    from reports.render import diff_sections, draw_rich, print_report

    written: list = []
    try:
        with sigterm_raises(), workers:
            _compute_and_write(works, unit, written)
    except (KeyboardInterrupt, Terminated) as exc:
        what = "terminated" if isinstance(exc, Terminated) else "interrupted"
        err.print(
            f"[red]{what}: worker processes stopped, temporary files removed; reports already "
            f"written: {escape(_names(written))}[/]"
        )
        raise typer.Exit(143 if isinstance(exc, Terminated) else 130)
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        err.print(
            f"[red]error: cannot write {escape(where)}{escape(exc.strerror or str(exc))}; "
            f"reports already written: {escape(_names(written))}[/]"
        )
        raise typer.Exit(WRITE_FAILED)
    reports = [r for _, r in written]
    for path, report in written:
        if not quiet:
            print_report(report, console)
        console.print(f"wrote {escape(str(path))}")
    try:
        diff, failures = decide(
            reports,
            [p for p, _ in written],
            gate.baseline,
            gate.fail_on,
            baseline_name=gate.name,
            requested=gate.requested,
            allow_missing=gate.allow_missing,
            allow_different_problem=gate.allow_different_problem,
        )
    except DiffInputError as exc:
        err.print(f"[red]--baseline: {escape(str(exc))}; exit 2[/]")
        raise typer.Exit(2)
    if diff is not None:
        console.print(draw_rich(diff_sections(diff)))
    _summarise(reports, diff)
    if junit is not None:
        from reports.junit import junit_xml

        write_junit(junit, junit_xml(written, fail_on=gate.fail_on, diff=diff, requested=gate.requested))
    if failures:
        for why in failures:
            err.print(f"[red]--fail-on {gate.fail_on}: {escape(why)}[/]")
        err.print(f"[red]--fail-on {gate.fail_on}: exit 1[/]")
        raise typer.Exit(1)


def _summarise(reports: list, diff) -> None:
    """The closing lines: one per report with its verdict counts, a recap across reports, and the
    diff's counts against the baseline."""
    from reports.summary import recap, report_line

    for report in reports:
        console.print(escape(report_line(report)))
    if (line := recap(reports)) is not None:
        console.print(escape(line))
    if diff is not None:
        console.print(escape(f"against {diff.old}: {diff.summary()}"))


def _names(written: list) -> str:
    return ", ".join(str(p) for p, _ in written) or "none"


def _compute_and_write(works: list[Work], unit: str, written: list) -> None:
    from reports.io import write_report

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=err,
        transient=False,
    ) as progress:
        for w in works:
            task = progress.add_task(escape(w.label), total=w.total)

            def advance(name: str, _task=task, _label=w.label) -> None:
                progress.update(_task, advance=1, description=escape(f"{_label}: {name}"))

            data = w.compute(advance)
            progress.update(task, description=escape(f"{w.label}: done"))
            written.append((w.path, write_report(w.path, data)))
