"""Start-up time of the report commands (``audit show``, ``diff``, ``validate``, ``schema`` and
``--version``) on a committed report, against the target of issue 25: each starts in <= 0.5 s.

Each command runs ``--repeats`` times as ``python -m audit ...`` in a fresh interpreter (this one's,
not a shim such as pyenv's, which adds its own start-up), from the repository; a run's figure is
its wall time and the CPU time (user + system) its process used, so a loaded machine shows up as
wall time above CPU time. Before the commands, the same for what every command pays: the bare
interpreter and the third-party imports of the command line. Each command's imported modules are
counted in one extra run, which also says whether torch was among them. Prints a table and writes
JSON (``--out``); CPU only, nothing is timed inside a test.

    python benchmarks/bench_startup.py [--out bench_startup.json] [--repeats 15]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REPORT = "docs/evidence/h200/h3_bitwise_reuse.gate_residual.json"
TARGET_S = 0.5
COMMANDS = {
    "show": ["show", REPORT],
    "diff": ["diff", REPORT, REPORT],
    "validate": ["validate", REPORT],
    "schema": ["schema"],
    "--version": ["--version"],
}
PARTS = {
    "interpreter": "pass",
    "pydantic": "import pydantic.main",
    "typer + rich": "import typer, rich.console, rich.table",
}
# Runs the command as ``python -m audit`` does, then prints the modules it imported as JSON.
_MODULES = (
    "import contextlib, io, json, runpy, sys\n"
    "sys.argv = ['audit', *sys.argv[1:]]\n"
    "with contextlib.redirect_stdout(io.StringIO()):\n"
    "    try:\n"
    "        runpy.run_module('audit', run_name='__main__')\n"
    "    except SystemExit:\n"
    "        pass\n"
    "print(json.dumps(sorted(sys.modules)))\n"
)


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one run of ``argv`` from the repository, its output discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def summary(samples: list[tuple[float, float]]) -> dict[str, float]:
    """Fastest and median wall time and median CPU time of a figure's runs, in seconds."""
    walls, cpus = [w for w, _ in samples], [c for _, c in samples]
    return {
        "wall_min_s": min(walls),
        "wall_median_s": statistics.median(walls),
        "cpu_median_s": statistics.median(cpus),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench_startup.json"))
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()

    argvs = {label: [sys.executable, "-c", code] for label, code in PARTS.items()}
    argvs |= {f"audit {name}": [sys.executable, "-m", "audit", *argv] for name, argv in COMMANDS.items()}
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in argvs}
    for _ in range(args.repeats):  # interleaved, so a burst of load spreads over every figure
        for name, argv in argvs.items():
            samples[name].append(timed(argv))

    print(f"{'':40s} {'wall min':>9s} {'median':>9s} {'CPU':>9s}   (s, {args.repeats} runs)")
    results = {}
    for label in PARTS:
        s = results[label] = summary(samples[label])
        print(f"{label:40s} {s['wall_min_s']:9.3f} {s['wall_median_s']:9.3f} {s['cpu_median_s']:9.3f}")
    for command, argv in COMMANDS.items():
        s = results[f"audit {command}"] = summary(samples[f"audit {command}"])
        modules = json.loads(
            subprocess.run(
                [sys.executable, "-c", _MODULES, *argv], cwd=REPO, capture_output=True, text=True, check=True
            ).stdout
        )
        s["modules"] = len(modules)
        s["torch_imported"] = "torch" in modules
        s["meets_target"] = s["wall_median_s"] <= TARGET_S
        print(
            f"{'audit ' + command:40s} {s['wall_min_s']:9.3f} {s['wall_median_s']:9.3f} {s['cpu_median_s']:9.3f}"
            f"   {len(modules)} modules, torch {'imported' if s['torch_imported'] else 'not imported'}"
            f", {'meets' if s['meets_target'] else 'misses'} the {TARGET_S} s target"
        )
    report = {
        "target_s": TARGET_S,
        "report": REPORT,
        "repeats": args.repeats,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
        },
        "results": results,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
