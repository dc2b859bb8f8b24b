"""The ``audit`` command line: can an existing library kernel be reused bit for bit?"""

from __future__ import annotations

import json
from dataclasses import dataclass
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from modes import MODES, get_mode
from reports.io import MAX_REPORT_MB
from reports.kinds import kind_names

from .ops import OPS
from .terminal import console_for

app = typer.Typer(
    help="Audit whether library kernels for MiniMax-H3 conditioning operators give bitwise the same "
    "outputs and gradients as the references (diffusers' MiniMax-H3 code and rl_kernel_ops), and "
    "whether they are batch-invariant. Reports are JSON in the schema of the RFC's example reports.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
console = console_for(sys.stdout)
err = console_for(sys.stderr)


def _version(value: bool) -> None:
    if value:
        from .candidates import version

        typer.echo(f"audit (bitwise-reuse-audit) {version('bitwise-reuse-audit') or 'unknown version'}")
        raise typer.Exit()


@app.callback()
def main(
    _: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = None,
) -> None:
    """Audit whether library kernels give bitwise the same outputs and gradients as the references."""


class Device(str, Enum):
    auto = "auto"
    cuda = "cuda"
    cpu = "cpu"


class Format(str, Enum):
    table = "table"
    markdown = "markdown"
    json = "json"


class FailOn(str, Enum):
    none = "none"
    regression = "regression"
    differ = "differ"


BaselineOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--baseline",
        help="Reports (a file or a directory) to diff the new reports against after writing them; "
        "the diff is printed, and --fail-on defaults to regression.",
    ),
]
FailOnOpt = Annotated[
    Optional[FailOn],
    typer.Option(
        "--fail-on",
        help="Exit 1 on: 'regression' (against --baseline; the default with one), 'differ' (any "
        "comparison not bitwise equal, or any candidate not batch-invariant, baseline or not), 'none' (the "
        "default without a baseline: exit 0 whatever the bits are).",
    ),
]


def _usage_error(message: str) -> typer.Exit:
    """Print ``message`` as one line on stderr; the returned Exit (status 2) is for ``raise``."""
    err.print(f"[red]error: {escape(message)}[/]")
    return typer.Exit(2)


def _seconds(value: float) -> float:
    if not value > 0:  # also refuses nan
        raise typer.BadParameter(f"{value} is not a number of seconds greater than 0")
    return value


Timeout = Annotated[
    float, typer.Option(callback=_seconds, help="Seconds one mode process may run before it is stopped (> 0).")
]
InheritEnv = Annotated[
    Optional[list[str]],
    typer.Option(
        "--inherit-env",
        metavar="NAME",
        help="Keep this numerics variable (e.g. CUBLAS_WORKSPACE_CONFIG) from the shell in every mode process "
        "and record it; repeatable. Otherwise such variables are removed.",
    ),
]


def _check_inherited(names: Optional[list[str]]) -> tuple[str, ...]:
    """The variables named with --inherit-env, once each; one not set in this shell is a usage error."""
    missing = [n for n in names or [] if n not in os.environ]
    if missing:
        raise _usage_error(f"--inherit-env: {', '.join(missing)} not set in this shell")
    return tuple(dict.fromkeys(names or []))


def _report_paths(out: Optional[Path], ops: list[str], kind: str) -> dict[str, Path]:
    from .paths import OutputPathError, report_paths

    try:
        return report_paths(out, ops, kind)
    except OutputPathError as exc:
        raise _usage_error(f"--out: {exc}") from None


def _load_adapters() -> None:
    """Register every candidate; a bad $AUDIT_PLUGINS module is a usage error naming it."""
    from .candidates import PluginError, load_adapters

    try:
        load_adapters()
    except PluginError as exc:
        raise _usage_error(str(exc)) from None


ConfigOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--config",
        help="audit.toml naming Python environments ([environments] NAME = PYTHON) and the modes that run "
        "in them ([modes] MODE = NAME). Default: ./audit.toml when it exists.",
    ),
]
EnvOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--env",
        metavar="NAME=PYTHON",
        help="Name an interpreter, e.g. another venv's bin/python; repeatable; adds to or overrides audit.toml.",
    ),
]
ModeEnvOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--mode-env",
        metavar="MODE=NAME",
        help="Run MODE's process in environment NAME; repeatable. To run a mode "
        "again in another environment, select it as --mode MODE@NAME.",
    ),
]


def _environments(config: Optional[Path], env: Optional[list[str]], mode_env: Optional[list[str]]):
    """The named environments; a bad config or --env/--mode-env value is a usage error (exit 2)."""
    from .environments import ConfigError, load

    try:
        return load(config, env or [], mode_env or [], list(MODES))
    except ConfigError as exc:
        raise _usage_error(str(exc)) from None


def _check_names(kind: str, given: list[str], valid: list[str]) -> None:
    unknown = [g for g in given if g not in valid]
    if unknown:
        raise typer.BadParameter(f"unknown {kind} {', '.join(map(repr, unknown))}; valid: {', '.join(valid)}")


def _check_selection(op: str, mode: Optional[list[str]], candidate: Optional[list[str]], envs=None) -> list[str]:
    """The ops selected; unknown op, mode (``MODE`` or ``MODE@ENV`` with ENV named) or candidate
    names are a usage error (status 2)."""
    from .candidates import candidates_for

    _load_adapters()
    ops = list(OPS) if op == "all" else [op]
    _check_names("op", ops, list(OPS))
    _check_names("mode", [m.partition("@")[0] for m in mode or []], list(MODES))
    named = envs.pythons if envs is not None else {}
    for m in mode or []:
        base, at, env = m.partition("@")
        if at and env not in named:
            raise _usage_error(
                f"--mode {m}: environment {env!r} is not named (--env {env or 'NAME'}=PYTHON or "
                f"audit.toml); named: {', '.join(named) or 'none'}"
            )
    slots = [*MODES, *(m for m in mode or [] if "@" in m)]
    known = {c.name for o in ops for c in candidates_for(o)}
    known |= {c.report_name(s) for o in ops for c in candidates_for(o) for s in slots if c.runs_in(s)}
    _check_names("candidate", candidate or [], sorted(known))
    return ops


def _modes_for(spec, mode: Optional[list[str]]) -> list[str]:
    """The selected modes ``spec`` runs in (``Mode.runs``)."""
    modes = list(mode) if mode else list(MODES)
    return [m for m in modes if get_mode(m).runs(spec)]


def _resolve_device(device: Device):
    import torch

    if device is Device.auto:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device is Device.cuda and not torch.cuda.is_available():
        raise typer.BadParameter("--device cuda: no CUDA device is visible to torch", param_hint="--device")
    return torch.device(device.value)


@app.command()
def run(
    op: Annotated[str, typer.Option("--op", help=f"Op to audit, or 'all': {', '.join(OPS)}.")] = "all",
    case: Annotated[
        Optional[list[int]],
        typer.Option("--case", help="Case size (rows); repeatable. Default: the op's cases (fewer on a CPU device)."),
    ] = None,
    mode: Annotated[
        Optional[list[str]],
        typer.Option(
            "--mode", help=f"Mode to run; repeatable. Default: every mode the op runs in ({', '.join(MODES)})."
        ),
    ] = None,
    candidate: Annotated[
        Optional[list[str]],
        typer.Option("--candidate", help="Candidate to run (plus the references); repeatable. Default: all."),
    ] = None,
    device: Annotated[Device, typer.Option(help="Where candidates run; auto picks cuda when visible.")] = Device.auto,
    out: Annotated[
        Optional[Path], typer.Option(help="Report file (one op) or directory. Default: audit-reports/.")
    ] = None,
    timeout: Timeout = 3600.0,
    inherit_env: InheritEnv = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print no tables, only where the reports went.")] = False,
    repeats: Annotated[
        int,
        typer.Option(
            help="Times every candidate, references included, computes each case; "
            "a tensor whose runs differ is marked not repeatable (nondeterministic). "
            "1 turns the check off."
        ),
    ] = 2,
    baseline: BaselineOpt = None,
    fail_on: FailOnOpt = None,
    config: ConfigOpt = None,
    env: EnvOpt = None,
    mode_env: ModeEnvOpt = None,
) -> None:
    """Run the bitwise-reuse audit: every mode in its own subprocess (in its own Python environment
    where audit.toml or --mode-env says so), every candidate and case computed --repeats times and
    compared bitwise with both references; writes one h3_bitwise_reuse report per op and prints the
    verdicts, then the detail tables. Exit 0, or 1 when --fail-on says so (a regression against
    --baseline, or any difference)."""
    from .assemble import bitwise_report
    from .ops import get_op
    from .runner import plan

    envs = _environments(config, env, mode_env)
    ops = _check_selection(op, mode, candidate, envs)
    if case and any(c < 1 for c in case):
        raise typer.BadParameter("a case is a number of rows, at least 1", param_hint="--case")
    if repeats < 1:
        raise typer.BadParameter("at least 1", param_hint="--repeats")
    paths = _report_paths(out, ops, "h3_bitwise_reuse")
    inherited = _check_inherited(inherit_env)
    gate = _gate_for(baseline, fail_on, "h3_bitwise_reuse", ops)
    dev = _resolve_device(device)
    plans = []
    for name in ops:
        spec = get_op(name)
        cases = list(dict.fromkeys(case)) if case else list(spec.cpu_cases if dev.type == "cpu" else spec.cases)
        modes = _modes_for(spec, mode)
        plans.append(plan(spec, "bitwise", modes, candidate, cases, dev, inherited, envs, repeats=repeats))
    if dev.type == "cpu" and not case:
        err.print("[dim]CPU device: using each op's CPU cases (pass --case to choose).[/]")
    _run_plans(plans, timeout, bitwise_report, paths, "candidate × case", quiet, gate)


@dataclass
class Gate:
    """The baseline set (loaded before anything runs) and what makes the run fail."""

    baseline: Optional[dict]
    name: str
    fail_on: str


def _gate_for(
    baseline: Optional[Path], fail_on: Optional[FailOn], kind: str, ops: list[str], quick: bool = False
) -> Gate:
    """Load and check --baseline before any computation: unusable input exits 2."""
    from reports.diff import baselined_ops
    from reports.io import ReportError, load_set

    chosen = fail_on.value if fail_on else ("regression" if baseline else "none")
    if baseline is None:
        if chosen == "regression":
            raise typer.BadParameter("--fail-on regression needs --baseline", param_hint="--fail-on")
        return Gate(None, "", chosen)
    try:
        found = load_set(baseline)
    except ReportError as exc:
        raise typer.BadParameter(str(exc), param_hint="--baseline") from None
    covered = baselined_ops(found, kind, ops, quick)
    if not covered:
        raise typer.BadParameter(
            f"{baseline} holds no {kind} report for {', '.join(ops)}" + (" (quick)" if quick else ""),
            param_hint="--baseline",
        )
    missing = [op for op in ops if op not in covered]
    if missing:
        err.print(f"[yellow]--baseline has no {kind} report for {escape(', '.join(missing))}: not gated[/]")
    return Gate(found, str(baseline), chosen)


def _run_plans(plans, timeout: float, assemble, paths: dict[str, Path], unit: str, quiet: bool, gate: Gate) -> None:
    """Run each plan under a progress bar counting ``unit``s (candidates x cases or checks, over
    the modes), write its report atomically to ``paths[op]``, then print the verdicts and tables,
    and the diff against the baseline. Ctrl-C or SIGTERM stops the mode processes, removes
    temporary files, names the reports already written and exits 130 or 143; no partial file is
    left. Exits 1 when the gate fails."""
    from reports.diff import gate as decide
    from reports.render import diff_sections, draw_rich, print_report

    from .interrupts import Terminated, sigterm_raises

    for p in [p for p in plans if not p.by_mode]:
        err.print(
            f"[yellow]{p.op.name}: none of the selected modes and candidates runs for this op "
            f"(row ops run in plain mode only); no report[/]"
        )
    plans = [p for p in plans if p.by_mode]
    if not plans:
        raise typer.BadParameter("nothing to run for the selected op, modes and candidates")
    written = []
    try:
        with sigterm_raises():
            _progress_run(plans, timeout, assemble, paths, unit, written)
    except (KeyboardInterrupt, Terminated) as exc:
        what = "terminated" if isinstance(exc, Terminated) else "interrupted"
        err.print(
            f"[red]{what}: mode processes stopped, temporary files removed; reports already "
            f"written: {escape(', '.join(str(p) for p, _ in written) or 'none')}[/]"
        )
        raise typer.Exit(143 if isinstance(exc, Terminated) else 130)
    for path, report in written:
        if not quiet:
            print_report(report, console)
        console.print(f"wrote {escape(str(path))}")
    diff, failed = decide([r for _, r in written], [p for p, _ in written], gate.baseline, gate.fail_on, gate.name)
    if diff is not None:
        console.print(draw_rich(diff_sections(diff)))
    if failed:
        why = "a regression against the baseline" if diff is not None and diff.regressed else "a difference"
        err.print(f"[red]--fail-on {gate.fail_on}: {why}; exit 1[/]")
        raise typer.Exit(1)


def _progress_run(plans, timeout: float, assemble, paths: dict[str, Path], unit: str, written: list) -> None:
    from reports.io import write_report

    from .runner import run_plan

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
        for p in plans:
            task = progress.add_task(f"{p.op.name}", total=p.total)

            def advance(name: str, _task=task, _op=p.op.name) -> None:
                progress.update(_task, advance=1, description=escape(f"{_op}: {name}"))

            report = assemble(p, run_plan(p, timeout, advance))
            progress.update(task, description=f"{p.op.name}: done")
            path = paths[p.op.name]
            written.append((path, write_report(path, report)))


@app.command("prior-art")
def prior_art(
    op: Annotated[str, typer.Option("--op", help=f"Op to check, or 'all': {', '.join(OPS)}.")] = "all",
    mode: Annotated[
        Optional[list[str]],
        typer.Option("--mode", help="Mode to run; repeatable. Default: every mode (row ops: plain only)."),
    ] = None,
    candidate: Annotated[
        Optional[list[str]], typer.Option("--candidate", help="Candidate to check; repeatable. Default: all.")
    ] = None,
    quick: Annotated[
        bool, typer.Option("--quick", help="Small sizes for smoke tests; the report says quick: true.")
    ] = False,
    device: Annotated[Device, typer.Option(help="Where candidates run; auto picks cuda when visible.")] = Device.auto,
    out: Annotated[
        Optional[Path], typer.Option(help="Report file (one op) or directory. Default: audit-reports/.")
    ] = None,
    megatron_src: Annotated[
        Optional[Path],
        typer.Option(
            "--megatron-src",
            help="A Megatron-LM source tree to use instead of the installed megatron-core; "
            "its commit goes into the report.",
        ),
    ] = None,
    timeout: Timeout = 3600.0,
    inherit_env: InheritEnv = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print no tables, only where the reports went.")] = False,
    baseline: BaselineOpt = None,
    fail_on: FailOnOpt = None,
    config: ConfigOpt = None,
    env: EnvOpt = None,
    mode_env: ModeEnvOpt = None,
) -> None:
    """Write the h3_prior_art report: for each mode and candidate, bitwise batch invariance (every
    row alone vs in batches, contiguous sub-batches, a batch-size sweep with probe rows, parameter
    gradients repeated), accuracy against FP64 and latency; each mode in its own process and, where
    configured, its own Python environment."""
    from .assemble import prior_art_report
    from .ops import get_op
    from .prior_art_sizes import CHECKS, sizes_for, sizes_json
    from .runner import plan

    envs = _environments(config, env, mode_env)
    ops = _check_selection(op, mode, candidate, envs)
    paths = _report_paths(out, ops, "h3_prior_art")
    inherited = _check_inherited(inherit_env)
    gate = _gate_for(baseline, fail_on, "h3_prior_art", ops, quick)
    commit = _use_megatron_src(megatron_src)
    dev = _resolve_device(device)
    plans = []
    for name in ops:
        spec = get_op(name)
        sizes = sizes_json(sizes_for(spec, quick))
        plans.append(
            plan(spec, "prior_art", _modes_for(spec, mode), candidate, CHECKS, dev, inherited, envs, sizes=sizes)
        )
    _run_plans(
        plans,
        timeout,
        lambda p, outcome: prior_art_report(p, outcome, quick, commit),
        paths,
        "candidate × check",
        quiet,
        gate,
    )


def _use_megatron_src(path: Optional[Path]) -> Optional[str]:
    """Point the mode processes at a Megatron-LM source tree; returns its short commit."""
    if path is None:
        return None
    if not (path / "megatron" / "core").is_dir():
        raise typer.BadParameter(
            f"{path} has no megatron/core: not a Megatron-LM source tree", param_hint="--megatron-src"
        )
    os.environ["AUDIT_MEGATRON_SRC"] = str(path.resolve())
    from adapters.megatron import source_commit

    return source_commit()


PLOT_INSTALL = "pip install '.[plot]'"
MaxSize = Annotated[float, typer.Option("--max-size", min=0.001, help="Largest report file to read, in MB.")]


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
    max_size: MaxSize = MAX_REPORT_MB,
) -> None:
    """Draw a report (needs matplotlib: pip install '.[plot]'). Prior-art: latency against rows
    (log-log), error against FP64, and each implementation's verdict. Bitwise: a candidate x case
    grid coloured by how many elements differ."""
    report = _load_or_exit(file, max_size)
    try:
        from reports.plot import plot_report
    except ImportError as exc:
        err.print(f"[red]audit plot needs matplotlib ({escape(str(exc))}); {escape(PLOT_INSTALL)}[/]")
        raise typer.Exit(2)
    from .paths import OutputPathError, file_target

    try:
        target = file_target(out or file.with_suffix(".png"), ".png")
    except OutputPathError as exc:
        raise _usage_error(f"--out: {exc}") from None
    try:
        plot_report(report, target)
    except TypeError as exc:  # a kind without a plot
        raise _usage_error(str(exc)) from None
    console.print(f"wrote {escape(str(target))}")


@app.command()
def show(
    files: Annotated[list[Path], typer.Argument(help="Report files of either kind.")],
    format: Annotated[
        Format, typer.Option("--format", "-f", help="table (rich), markdown (for CI summaries) or json.")
    ] = Format.table,
    only_differ: Annotated[
        bool, typer.Option("--only-differ", help="Hide equal cells, and rows and tables left empty.")
    ] = False,
    candidate: Annotated[
        Optional[str],
        typer.Option("--candidate", help="Show only what involves this candidate (e.g. liger, diffusers[sglang])."),
    ] = None,
    max_size: MaxSize = MAX_REPORT_MB,
) -> None:
    """Render reports: the verdict table first (one line per candidate and reference, each pair
    once), then the detail tables (bitwise: per case and tensor; prior-art: per mode)."""
    from reports.kinds import kind_of
    from reports.render import View, print_report, to_markdown

    view = View(only_differ=only_differ, candidate=candidate)
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
            typer.echo(report.model_dump_json(indent=2))


@app.command()
def diff(
    old: Annotated[Path, typer.Argument(help="Earlier reports: a file or a directory.")],
    new: Annotated[Path, typer.Argument(help="Later reports of the same kind: a file or a directory.")],
    format: Annotated[
        Format, typer.Option("--format", "-f", help="table (rich), markdown (for CI summaries) or json.")
    ] = Format.table,
) -> None:
    """What changed from OLD to NEW, matched by report kind and op: environment (GPU, torch, CUDA,
    libraries, mode variables), candidates and cases that appeared or disappeared, and each change
    of state: equal->differ and available->unavailable are regressions, the reverse improvements,
    a changed count of differing elements a change, and any change on a non-repeatable comparison
    noise. Prior-art: invariant->not invariant is a regression; latency NEW/OLD per size.
    Exit 0: no regression; 1: a regression; 2: unusable input."""
    from reports.diff import DiffInputError, diff_sets
    from reports.io import ReportError, load_set
    from reports.render import diff_sections, draw_markdown, draw_rich

    try:
        found = diff_sets(load_set(old), load_set(new), old_name=str(old), new_name=str(new))
    except (DiffInputError, ReportError) as exc:
        err.print(f"[red]{escape(str(exc))}[/]")
        raise typer.Exit(2)
    if format is Format.table:
        console.print(draw_rich(diff_sections(found)))
    elif format is Format.markdown:
        typer.echo(draw_markdown(diff_sections(found)))
    else:
        typer.echo(found.model_dump_json(indent=2))
    if found.regressed:
        raise typer.Exit(1)


@app.command()
def validate(
    files: Annotated[list[Path], typer.Argument(help="Report files to check against the schema.")],
    max_size: MaxSize = MAX_REPORT_MB,
) -> None:
    """Exit 0 when every file is a valid report; otherwise exit 1 naming each offending field by its JSON path."""
    from reports.io import ReportError, load_report

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


@app.command()
def schema(
    kind: Annotated[
        Optional[str],
        typer.Option(help=f"{', '.join(kind_names())}; default: any."),
    ] = None,
) -> None:
    """Print the JSON Schema generated from the report models."""
    from reports.kinds import json_schema

    if kind is not None:
        _check_names("kind", [kind], kind_names())
    typer.echo(json.dumps(json_schema(kind), indent=2))


@app.command("list")
def list_(
    device: Annotated[Device, typer.Option(help="Device to judge availability for.")] = Device.auto,
    config: ConfigOpt = None,
    env: EnvOpt = None,
    mode_env: ModeEnvOpt = None,
) -> None:
    """Ops, candidates per op and modes, each with whether it can run here and, if not, why; a mode
    mapped to another Python environment is judged in that environment."""
    from .listing import candidate_lines, mode_lines

    envs = _environments(config, env, mode_env)
    _load_adapters()
    dev = _resolve_device(device)
    ops = Table(title=f"ops (device: {dev})", title_justify="left")
    for col in ("op", "kind", "what", "cases", "references"):
        ops.add_column(col)
    for spec in OPS.values():
        cases = spec.cpu_cases if dev.type == "cpu" else spec.cases
        ops.add_row(spec.name, spec.kind, escape(spec.summary), " ".join(map(str, cases)), ", ".join(spec.references))
    console.print(ops)
    cands = Table(title="candidates (in this interpreter)", title_justify="left")
    for col in ("op", "candidate", "modes", "grads", "available here"):
        cands.add_column(col, overflow="fold", no_wrap=col in ("op", "candidate"))
    for c in candidate_lines(dev):
        cands.add_row(c.op, c.name, c.modes, c.grads, _available(c.unavailable))
    console.print(cands)
    modes = Table(title="modes", title_justify="left")
    lines = mode_lines(dev, envs)
    widest = max(len(f"{k}={v}") for m in lines for k, v in m.variables.items())
    for col in ("mode", "variables", "what", "runs in", "available there"):
        modes.add_column(col, overflow="fold", no_wrap=col == "mode", min_width=widest if col == "variables" else None)
    for m in lines:
        variables = "\n".join(f"{k}={v}" for k, v in m.variables.items()) or "—"
        modes.add_row(m.name, variables, m.summary, escape(m.runs_in), _available(m.unavailable))
    console.print(modes)


def _available(reason: str | None) -> str:
    return "[green]yes[/]" if reason is None else f"[grey50]no: {escape(reason)}[/]"


# Commands of their own concern, in their own modules; importing them registers them on ``app``.
from . import cli_chain, cli_env, cli_parallel  # noqa: E402,F401
