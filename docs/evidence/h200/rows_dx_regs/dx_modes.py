"""The split dx kernel (norm_modulate_bwd_dx) in RLK_DX_MODE 0 (HEAD's) to 5 (the attempt): dx bitwise
against mode 0 at several shapes, then graphed times (20 replays, median of 15) at H = 5376 beside
torch.add over the same bytes."""

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path("benchmarks").resolve()))
from bench_common import copy_bandwidth, median_ms  # noqa: E402
from bench_row_ops import EPS, H, R, captured  # noqa: E402

from audit.core.inputs import packed_index  # noqa: E402
from rl_kernel_ops import _build  # noqa: E402

_build.load_extension()
ops = torch.ops.rl_kernel_ops
MODES = [0, 1, 2, 3, 4, 5]


def inputs(S, cols, seed=0):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    rnd = lambda *shape, s=1.0: (torch.randn(*shape, device="cuda", generator=gen) * s).to(torch.bfloat16)  # noqa: E731
    x, g = rnd(S, cols, s=2.0), rnd(S, cols)
    w = (0.5 + torch.rand(cols, device="cuda", generator=gen)).to(torch.bfloat16)
    sh, sc = rnd(R, cols, s=0.1), rnd(R, cols, s=0.1)
    idx = packed_index(3, S).cuda() % R
    rstd = ops.norm_modulate_fwd(x, w, sh, sc, idx, EPS)[1]
    return g, x, rstd, w, sc, idx


def dx(mode, args):
    os.environ["RLK_DX_MODE"] = str(mode)
    out = ops.norm_modulate_bwd_dx(*args)
    torch.cuda.synchronize()
    return out


bad = 0
for S, cols in ((1, 8), (7, 1024), (257, 5376), (4097, 5376), (33, 16384), (100, 2048), (50, 6144), (3, 6152)):
    args = inputs(S, cols)
    ref = dx(0, args)
    for m in MODES[1:]:
        same = torch.equal(dx(m, args).view(torch.int16), ref.view(torch.int16))
        bad += not same
        if not same:
            print(f"DIFFERENT BITS S={S} H={cols} mode {m}", flush=True)
print(f"bits: {bad} differing (shape, mode) pairs of {8 * (len(MODES) - 1)}", flush=True)

copy = copy_bandwidth(20, 100)
print(f"copy {copy:.0f} GB/s", flush=True)
for S in [int(s) for s in sys.argv[1:]] or [4097]:
    args = inputs(S, H)
    g, x = args[0], args[1]
    out = torch.empty_like(x)
    nbytes = 3 * S * H * 2
    line = f"S={S}"
    add = median_ms(captured(lambda: torch.add(g, x, out=out)), warmup=5, iters=15, calls=20) * 1000
    line += f" | add {add:.1f}"
    for m in MODES:
        os.environ["RLK_DX_MODE"] = str(m)
        us = median_ms(captured(lambda: ops.norm_modulate_bwd_dx(*args)), warmup=5, iters=15, calls=20) * 1000
        line += f" | m{m} {us:.1f} ({nbytes / us / 1e3 / copy:.1%})"
    print(line + " us", flush=True)
