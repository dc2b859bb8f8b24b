"""Experiments on norm_modulate's backward at small S, with an experimental tree of rl_kernel_ops
first on PYTHONPATH (run from the repository root). Every time is bench_common.median_ms: the
median of 10 CUDA-event samples of 20 back-to-back calls, after 5 warm-ups.

    --layouts P:T[:D],...  (the tree of parts_attempt.diff + layouts_override.diff) the fused kernel
        with P blocks per tile, T threads, a ring of at most D slots (RLK_PARTS, RLK_THREADS,
        RLK_DEPTH), its dx and partials compared bitwise with the split kernels'; without
        --layouts, the tree's own layout
    --batches              (the tree of batch_variant.diff) the partials kernel with row batches of
        4, 8 and 16 (RLK_BATCH), bitwise against batch 4, beside the fused and the dx kernel

This file merges the two scripts that produced layouts_probe.txt and batch_probe.txt (the same
calls, timing and printout)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "benchmarks"))
from bench_common import median_ms  # noqa: E402
from bench_row_ops import EPS, H, R, random_bf16  # noqa: E402

import rl_kernel_ops  # noqa: E402
from audit.core.compare import bit_patterns  # noqa: E402
from audit.core.inputs import packed_index  # noqa: E402
from rl_kernel_ops import _build, cuda_rows  # noqa: E402


def us(fn) -> float:
    return median_ms(fn, warmup=5, iters=10, calls=20) * 1000


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(bit_patterns(a), bit_patterns(b))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", help="S values, comma-separated")
    parser.add_argument("--layouts", default="", help="P:T[:D],... (empty: the tree's own layout)")
    parser.add_argument("--batches", action="store_true")
    args = parser.parse_args()
    _build.load_extension()
    ops = torch.ops.rl_kernel_ops
    print("rl_kernel_ops from", os.path.dirname(rl_kernel_ops.__file__), flush=True)
    for S in (int(s) for s in args.sizes.split(",")):
        torch.manual_seed(S)
        x, w = random_bf16((S, H), 2.0), (0.5 + torch.rand(H, device="cuda")).to(torch.bfloat16)
        sh, sc, g = random_bf16((R, H), 0.1), random_bf16((R, H), 0.1), random_bf16((S, H))
        idx = packed_index(3, S).cuda()
        _, rstd = ops.norm_modulate_fwd(x, w, sh, sc, idx, EPS)
        plan = (*cuda_rows._plan(ops, idx, R), cuda_rows.TILE_ROWS)
        real = int(plan[2][-1])
        dx = ops.norm_modulate_bwd_dx(g, x, rstd, w, sc, idx)
        partials = ops.norm_modulate_bwd_partials(g, x, rstd, w, sc, *plan)[:, :real]
        fused = lambda: ops.norm_modulate_bwd(g, x, rstd, w, sc, idx, *plan)  # noqa: E731
        if args.batches:
            dx_t, fused_t = us(lambda: ops.norm_modulate_bwd_dx(g, x, rstd, w, sc, idx)), us(fused)
            line = f"S={S:6d} tiles {real:4d}  fused {fused_t:6.1f} us  dx {dx_t:6.1f} us  partials"
            for batch in ("4", "8", "16"):
                os.environ["RLK_BATCH"] = batch
                same = same_bits(ops.norm_modulate_bwd_partials(g, x, rstd, w, sc, *plan)[:, :real], partials)
                t = us(lambda: ops.norm_modulate_bwd_partials(g, x, rstd, w, sc, *plan))
                line += f" | b{batch} {t:6.1f} us{'' if same else ' DIFFERENT BITS'}"
            print(line, flush=True)
            continue
        split = us(
            lambda: (
                ops.norm_modulate_bwd_dx(g, x, rstd, w, sc, idx),
                ops.norm_modulate_bwd_partials(g, x, rstd, w, sc, *plan),
            )
        )
        print(f"S={S} tiles<= {plan[3]} real {real}  split kernels {split:.1f} us", flush=True)
        for config in [c.split(":") for c in args.layouts.split(",")] if args.layouts else [[]]:
            for key in ("RLK_PARTS", "RLK_THREADS", "RLK_DEPTH"):
                os.environ.pop(key, None)
            for key, value in zip(("RLK_PARTS", "RLK_THREADS", "RLK_DEPTH"), config):
                os.environ[key] = value
            try:
                fused_dx, fused_partials = fused()
                same = same_bits(fused_dx, dx) and same_bits(fused_partials[:, :real], partials)
                print(
                    f"  parts:threads:depth {':'.join(config) or 'default':12s} fused {us(fused):6.1f} us"
                    f"  same bits {same}",
                    flush=True,
                )
            except Exception as exc:
                print(f"  {':'.join(config)}: {str(exc).splitlines()[0][:150]}", flush=True)


if __name__ == "__main__":
    main()
