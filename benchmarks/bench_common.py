"""What the benchmark scripts and the evidence probes share: the checks before a run, steps that
keep what finished when one stops, CUDA-event timing, per-kernel device times, the copy bandwidth
and the machine block of their JSON."""

from __future__ import annotations

import argparse
import platform
import statistics
import traceback
from collections.abc import Callable
from pathlib import Path

import torch


def preflight(parser: argparse.ArgumentParser, out: Path) -> None:
    """What a benchmark needs, checked before it times anything: ``out`` is a ``.json`` file in an
    existing folder that takes a new file (``audit.cli.paths.file_target``, as the audit checks its
    own ``--out``), a CUDA device is visible, and rl_kernel_ops' extension builds (where its sources
    changed) and loads. The first that fails ends the script with exit status 2 and one line on
    stderr that names it (a failed build's compiler output follows that line)."""
    from audit.cli.paths import OutputPathError, file_target
    from rl_kernel_ops import _build

    try:
        if not out.parent.is_dir():  # a benchmark makes no folder
            raise OutputPathError(f"the folder {out.parent} does not exist")
        file_target(out, ".json")
    except OutputPathError as exc:
        parser.exit(2, f"{parser.prog}: --out {out}: {exc}\n")
    if not torch.cuda.is_available():
        parser.exit(2, f"{parser.prog}: needs a CUDA device; torch {torch.__version__} sees none\n")
    try:
        _build.load_extension()
    except Exception as exc:  # any failure to build or load is the reason; a build prints its compiler output
        parser.exit(2, f"{parser.prog}: rl_kernel_ops cannot be built or loaded: {type(exc).__name__}: {exc}\n")


def run_steps(steps: dict[str, Callable[[], object]]) -> tuple[dict[str, object], str | None, int]:
    """Runs ``steps`` in order and returns what each returned, by name. Ctrl-C, SIGTERM or an error
    (a CUDA out-of-memory among them, its traceback printed) ends the run in the step it stops,
    and the steps after it do not run; then the second and third values say what happened, naming
    that step, and give the exit status (130, 143, 1), so that the caller still writes what the
    steps before it finished. (None, 0) when every step ran."""
    from audit.cli.session import Terminated, sigterm_raises

    done: dict[str, object] = {}
    with sigterm_raises():
        for name, step in steps.items():
            try:
                done[name] = step()
            except KeyboardInterrupt:
                return done, f"interrupted (Ctrl-C) in {name}", 130
            except Terminated:
                return done, f"terminated (SIGTERM) in {name}", 143
            except Exception as exc:  # any failure ends the run; what finished before it is kept
                traceback.print_exc()
                first = next(iter(str(exc).splitlines()), "")
                return done, f"{type(exc).__name__} in {name}" + (f": {first}" if first else ""), 1
    return done, None, 0


def sample_ms(fn, calls: int = 1) -> float:
    """CUDA-event time of ``calls`` back-to-back calls, per call; waits for its end event, so with
    ``calls=1`` the host's launch overhead is inside the sample."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def median_ms(fn, warmup: int, iters: int, calls: int = 1) -> float:
    """Median over ``iters`` samples (``sample_ms``) after ``warmup`` calls."""
    return paired_median_ms({"fn": fn}, warmup, iters, calls)["fn"]


def paired_median_ms(fns: dict, warmup: int, iters: int, calls: int = 1) -> dict[str, float]:
    """``median_ms`` of each function, their samples interleaved: each round takes one sample of
    every function, the first one rotating from round to round, so that drifts of the clocks
    and of the power state fall on all of them alike (a side-by-side ratio, not two runs)."""
    names = list(fns)
    for name in names:
        for _ in range(warmup):
            fns[name]()
    torch.cuda.synchronize()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for i in range(iters):
        for j in range(len(names)):
            name = names[(i + j) % len(names)]
            samples[name].append(sample_ms(fns[name], calls))
    return {name: statistics.median(s) for name, s in samples.items()}


def kernel_times_us(step, warmup: int, iters: int) -> dict[str, float]:
    """Device microseconds per call of ``step`` in each CUDA kernel it launches (summed over its
    launches, names cut at 110 characters), largest first: torch.profiler over ``iters`` calls after
    ``warmup`` unprofiled ones. The profiler's own overhead is inside the times."""
    from collections import defaultdict

    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            step()
        torch.cuda.synchronize()
    times: dict[str, float] = defaultdict(float)
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            times[event.name[:110]] += event.device_time / iters
    return dict(sorted(times.items(), key=lambda kv: -kv[1]))


def copy_bandwidth(warmup: int = 20, iters: int = 100) -> float:
    """Bytes read + written per second by a device-to-device copy of 1 GiB, in GB/s."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), warmup, iters)
    return 2 * src.numel() / ms / 1e6


def machine() -> dict:
    """The GPU, its capability, torch, CUDA and Python versions the numbers were measured with."""
    return {
        "gpu": torch.cuda.get_device_name(),
        "capability": list(torch.cuda.get_device_capability()),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
    }
