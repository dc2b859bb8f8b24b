"""norm_modulate's backward kernels side by side at several S (run from the repository root):
the split pair (dx kernel, then the partials kernel), and norm_modulate_bwd with each variant:
the fused kernel (1), the overlapped kernel (2: partial blocks and dx blocks in one launch) and
its own choice between the two (0). Each one's dx and partials are compared bitwise with the
split pair's. Every time is bench_common.median_ms: the median of 10 CUDA-event samples of 20
back-to-back calls, after 5 warm-ups.

    python docs/evidence/h200/rows_overlap/probe_overlap.py 1024,4097,32768
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "rows_graphed"))
from probe_fused_layouts import EPS, H, R, random_bf16, same_bits, us  # noqa: E402

from audit.core.inputs import packed_index  # noqa: E402
from rl_kernel_ops import _build, cuda_rows  # noqa: E402


VARIANTS = (("fused", 1), ("overlapped", 2), ("chosen", 0))


def probe(sizes: str, variants=VARIANTS) -> None:
    """One line per S of the comma-separated `sizes`: the split pair's time, then each (name,
    variant)'s time and whether its bits are the split pair's."""
    _build.load_extension()
    ops = torch.ops.rl_kernel_ops
    for S in (int(s) for s in sizes.split(",")):
        torch.manual_seed(S)
        x, w = random_bf16((S, H), 2.0), (0.5 + torch.rand(H, device="cuda")).to(torch.bfloat16)
        sc, g = random_bf16((R, H), 0.1), random_bf16((S, H))
        idx = packed_index(3, S).cuda()
        _, rstd = ops.norm_modulate_fwd(x, w, sc, sc, idx, EPS)
        plan = (*cuda_rows._plan(ops, idx, R), cuda_rows.TILE_ROWS)
        real = int(plan[2][-1])
        dx = ops.norm_modulate_bwd_dx(g, x, rstd, w, sc, idx)
        partials = ops.norm_modulate_bwd_partials(g, x, rstd, w, sc, *plan)[:, :real]
        split = us(
            lambda: (
                ops.norm_modulate_bwd_dx(g, x, rstd, w, sc, idx),
                ops.norm_modulate_bwd_partials(g, x, rstd, w, sc, *plan),
            )
        )
        line = f"S={S:6d} tiles {real:4d}  split {split:6.1f} us"
        for name, variant in variants:
            d, p = ops.norm_modulate_bwd(g, x, rstd, w, sc, idx, *plan, variant)
            same = same_bits(d, dx) and same_bits(p[:, :real], partials)
            t = us(lambda: ops.norm_modulate_bwd(g, x, rstd, w, sc, idx, *plan, variant))  # noqa: B023
            line += f" | {name} {t:6.1f} us{'' if same else ' DIFFERENT BITS'}"
        print(line, flush=True)


if __name__ == "__main__":
    probe(sys.argv[1])
