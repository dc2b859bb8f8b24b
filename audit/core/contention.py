"""Competing GPU load: ``contention(device)`` keeps a side CUDA stream busy with BF16 GEMMs, issued
from a thread of its own, while the block runs, so a kernel whose result depends on how it is
scheduled against other work shows up as not repeatable (bitwise) or not batch-invariant (prior
art). CUDA only: on a CPU there is no stream to compete with, and a competing CPU thread would not
change how a CPU kernel splits its work (that follows the thread count, not the load), so the
commands refuse ``--contention`` there.

The load's operands are drawn once, from their own generator; what it computes is thrown away
and never touches the candidates' tensors.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch

SIZE = 4096  # the side GEMMs are SIZE x SIZE x SIZE, BF16
BURST = 8  # GEMMs queued between two waits, so that the load stops soon after it is told to


@contextlib.contextmanager
def contention(device: torch.device) -> Iterator[None]:
    """Run the block while a side stream on ``device`` computes GEMMs without pause; the load is
    stopped and drained before this returns. Raises ValueError for a device that is not CUDA."""
    if device.type != "cuda":
        raise ValueError(f"contention needs a CUDA device, not {device}")
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(SIZE, SIZE, device=device, dtype=torch.bfloat16, generator=gen)
    b = torch.randn(SIZE, SIZE, device=device, dtype=torch.bfloat16, generator=gen)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    stop = threading.Event()
    failed: list[BaseException] = []

    def load() -> None:
        try:
            with torch.cuda.device(device), torch.cuda.stream(side):
                while not stop.is_set():
                    for _ in range(BURST):
                        torch.mm(a, b)
                    side.synchronize()
        except BaseException as exc:
            failed.append(exc)

    worker = threading.Thread(target=load, name="audit-contention", daemon=True)
    worker.start()
    try:
        yield
    finally:
        stop.set()
        worker.join()
        side.synchronize()
    if failed:
        raise RuntimeError(f"the contention load failed: {failed[0]!r}")
