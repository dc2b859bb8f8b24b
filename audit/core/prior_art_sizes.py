"""What the prior-art checks measure, and at which sizes: the check names in order, the sizes of
each check (the example report's by default, a quick set for smoke runs), and the rows, sub-batches
and batch sizes they visit. The CLI plans with these; the worker (``audit.prior_art``) runs them.
Pure functions of their arguments."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from audit.core.ops import OpSpec

CHECKS = ["all_rows", "params_repeatable", "full_vs_sub_batches", "batch_size_sweep", "accuracy_latency"]


@dataclass(frozen=True)
class Sizes:
    """The sizes of every check; the defaults are the example report's."""

    full_batch: int
    sub_batch_sizes: tuple[int, ...]
    accuracy: tuple[int, ...]
    seeds: tuple[int, ...] = (3, 4, 5)
    all_rows: tuple[int, ...] = (64, 257, 2048)
    sub_seeds: tuple[int, ...] = (3, 4)
    sweep_rows: int = 2048
    warmup: int = 20
    samples: int = 100


def sizes_for(op: OpSpec, quick: bool) -> Sizes:
    if quick:
        return Sizes(
            full_batch=64,
            sub_batch_sizes=(1, 7, 32),
            accuracy=(1, 4) if op.kind == "gemm" else (1, 33),
            all_rows=(4, 9),
            sweep_rows=16,
            warmup=2,
            samples=5,
        )
    if op.kind == "gemm":
        return Sizes(full_batch=4096, sub_batch_sizes=(1, 7, 1024, 2048), accuracy=(1, 3, 4, 64, 256, 2048))
    return Sizes(full_batch=131072, sub_batch_sizes=(1, 7, 4097, 32768, 65536), accuracy=(4097, 32768))


def sub_batch_starts(full: int, size: int) -> range:
    """Contiguous sub-batches: below 1024 rows the start advances by max(size, full // 512)."""
    step = max(size, full // 512) if size < 1024 else size
    return range(0, full - size + 1, step)


def sweep_sizes(n: int) -> list[int]:
    """1..9 and 2^k - 1, 2^k, 2^k + 1 up to n, plus n."""
    sizes = set(range(1, min(n, 9) + 1)) | {n}
    k = 1
    while 2**k - 1 <= n:
        sizes |= {s for s in (2**k - 1, 2**k, 2**k + 1) if s <= n}
        k += 1
    return sorted(sizes)


def probe_rows(n: int) -> list[int]:
    """Rows 0 and n - 1, and six rows from n // 8 + 3 in steps of n // 8."""
    step = n // 8
    return sorted({0, n - 1} | {min(n - 1, step + 3 + i * step) for i in range(6)})


def positions(m: int) -> list[int]:
    return sorted({0, (m - 1) // 2, m - 1})


def sizes_json(sizes: Sizes) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(sizes).items()}


def sizes_from_json(data: dict) -> Sizes:
    """The inverse of ``sizes_json``: JSON lists back to tuples."""
    return Sizes(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})
