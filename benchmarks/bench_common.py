"""What both benchmark scripts share: CUDA-event timing, the copy bandwidth and the machine block of
their JSON."""

from __future__ import annotations

import platform
import statistics

import torch


def median_ms(fn, warmup: int, iters: int, calls: int = 1) -> float:
    """Median over ``iters`` samples of (CUDA-event time of ``calls`` back-to-back calls) / calls,
    after ``warmup`` calls; each sample waits for its end event, so with ``calls=1`` the host's
    launch overhead is inside the sample."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / calls)
    return statistics.median(samples)


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
