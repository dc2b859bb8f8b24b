"""The options the commands share, as ``Annotated`` aliases: one declaration each, so that every
command that takes ``--device``, ``--out`` or ``--timeout`` says and checks the same thing."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from audit.core.names import OP_NAMES
from modes import MODES
from reports.io import MAX_REPORT_MB


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
    kernel_change = "kernel-change"


def _seconds(value: float) -> float:
    if not value > 0:  # also refuses nan
        raise typer.BadParameter(f"{value} is not a number of seconds greater than 0")
    return value


OpOpt = Annotated[str, typer.Option("--op", help=f"Op, or 'all': {', '.join(OP_NAMES)}.")]
ModeOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--mode",
        help=f"Mode to run, each in its own process; repeatable; MODE@ENV runs it again in environment ENV. "
        f"({', '.join(MODES)})",
    ),
]
CandidateOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--candidate",
        help="Candidate to run, by name (in every selected mode it runs in) or report name (diffusers[vllm]: that "
        "mode only); the references always run where needed; repeatable. One that runs in none of the selected "
        "modes is refused.",
    ),
]
CaseOpt = Annotated[
    Optional[list[int]],
    typer.Option("--case", help="Case size (rows); repeatable. Default: the op's cases (fewer on a CPU device)."),
]
DeviceOpt = Annotated[Device, typer.Option(help="Where candidates run; auto picks cuda when visible.")]
OutOpt = Annotated[
    Optional[Path],
    typer.Option(
        help="Report file (KIND.NAME.json, one report) or directory (default: audit-reports/). "
        "Checked before anything runs."
    ),
]
TimeoutOpt = Annotated[
    float,
    typer.Option(
        callback=_seconds,
        help="Seconds one worker process (or the probe of another interpreter) may run before it and "
        "everything it started is killed (> 0).",
    ),
]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print no tables, only where the reports went.")]
InheritEnvOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--inherit-env",
        metavar="NAME",
        help="Keep this numerics variable (e.g. CUBLAS_WORKSPACE_CONFIG) from the shell in every worker "
        "and record it; repeatable. Otherwise such variables are removed.",
    ),
]
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
        help="Exit 1 on: 'regression' (against --baseline, the default with one: a comparison that got "
        "worse, or a report, mode, candidate, case or tensor of the baseline missing from this run), 'differ' "
        "(that, and any comparison not bitwise equal, any candidate not batch-invariant, a --candidate that did "
        "not run or not everywhere (a case, a length), or a report in which nothing was compared), 'kernel-change' "
        "('regression', and any kernel change against --baseline, whose reports need kernel fingerprints, even "
        "where the bits stayed equal), "
        "'none' (the default without a baseline: exit 0 whatever the bits are).",
    ),
]
AllowMissingOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--allow-missing",
        metavar="NAME",
        help="What the baseline (or OLD) has and this run (or NEW) may lack: a candidate, case, mode, op or "
        "tensor name, or 'all'; repeatable. The loss is still listed, but fails no gate.",
    ),
]
AllowDifferentProblemOpt = Annotated[
    bool,
    typer.Option(
        "--allow-different-problem",
        help="Compare reports of different problems (a chain replay's block, backward, lengths or stage "
        "candidates; the inputs' sha256 of a case both reports ran); the settings that differ are listed. "
        "Otherwise that is exit 2.",
    ),
]
ContentionOpt = Annotated[
    bool,
    typer.Option(
        "--contention",
        help="Keep the GPU busy with BF16 GEMMs on a side CUDA stream while the repeats (audit run: the first "
        "computation runs on a quiet GPU, every repeat under load) or the batch-invariance checks (prior-art) run, "
        "so a kernel whose bits depend on scheduling shows up; the report says contention: true. CUDA only: "
        "refused on a CPU device, where no stream competes and a competing thread would not change how a CPU "
        "kernel splits its work.",
    ),
]
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
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="table (rich), markdown (for CI summaries) or json.")]
MaxSizeOpt = Annotated[
    float,
    typer.Option("--max-size", min=0.001, help=f"Largest report file to read, in MB (default {MAX_REPORT_MB:g})."),
]
HtmlOpt = Annotated[
    Path,
    typer.Option(
        "--html",
        help="The HTML file to write (ending in .html): one self-contained page, no network needed. "
        "Checked before anything is read.",
    ),
]
JunitOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--junit",
        help="Also write JUnit XML (ending in .xml): a test case per verdict and per compared cell (candidate × "
        "case × tensor, stage or step), failing exactly on what makes the exit status 1. Checked before anything "
        "runs.",
    ),
]
