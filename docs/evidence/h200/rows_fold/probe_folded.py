"""The overlapped backward with the fold in its launch (norm_modulate_bwd_folded) against the
overlapped backward then row_segment_fold twice: bits of dx, seg (FP32, BF16) and dw, and times
(pipelined and graphed). Also a plan with table rows that have no positions (idx < 5 of R = 9)."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path("benchmarks").resolve()))
from bench_common import median_ms  # noqa: E402
from bench_row_ops import EPS, H, R, captured, random_bf16  # noqa: E402

from audit.core.inputs import packed_index  # noqa: E402
from rl_kernel_ops import _build, cuda_rows  # noqa: E402

_build.load_extension()
ops = torch.ops.rl_kernel_ops


def bits(t):
    return t.contiguous().view({torch.bfloat16: torch.int16, torch.float32: torch.int32}[t.dtype])


for S, used in ((64, R), (1024, R), (2048, R), (4097, R), (4097, 5), (6144, R)):
    torch.manual_seed(S)
    x, w = random_bf16((S, H), 2.0), (0.5 + torch.rand(H, device="cuda")).to(torch.bfloat16)
    sc, g = random_bf16((R, H), 0.1), random_bf16((S, H))
    idx = (packed_index(3, S) % used).cuda()
    _, rstd = ops.norm_modulate_fwd(x, w, sc, sc, idx, EPS)
    perm, seg_start, tile_start, tiles = cuda_rows._plan(ops, idx, R)
    plan = (perm, seg_start, tile_start, tiles, cuda_rows.TILE_ROWS)

    def two_launches():
        dx, partials = ops.norm_modulate_bwd(g, x, rstd, w, sc, idx, *plan, 2)
        seg, seg_bf16 = ops.row_segment_fold(partials, tile_start)
        return dx, seg, seg_bf16, ops.row_segment_fold(seg[2:3], None)[1][0, 0]

    def one_launch():
        return ops.norm_modulate_bwd_folded(g, x, rstd, w, sc, *plan)

    ref, new = two_launches(), one_launch()
    names = ("dx", "seg", "seg_bf16", "dw")
    diff = {n: int((bits(a) != bits(b)).sum()) for n, a, b in zip(names, ref, new)}
    same = all(v == 0 for v in diff.values())
    t = {}
    for name, fn in (("two", two_launches), ("one", one_launch)):
        t[name] = median_ms(fn, warmup=5, iters=15, calls=20) * 1000
        t[name + "_graphed"] = median_ms(captured(fn), warmup=5, iters=15, calls=20) * 1000
    print(
        f"S={S:5d} table rows used {used}: {'same bits' if same else 'DIFFERENT ' + str(diff)} | "
        f"overlapped + 2 folds {t['two']:6.1f} us (graphed {t['two_graphed']:6.1f}) | "
        f"folded {t['one']:6.1f} us (graphed {t['one_graphed']:6.1f})",
        flush=True,
    )
