"""call6_trace_attempt.diff's stamps of one tile's cluster (argv[1], the tile; default 30) at S =
4097 (bench_row_ops' inputs), variant 4, after two untraced calls: per group g and block k, in us
from the first stamp, when block k's own row of group g was loaded (issued), told (landed), and
when block k's compute warp 0 was past its waits for group g, had its partial sums and its dx,
and warp 4 past its waits; then medians of the steps."""

import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path("benchmarks").resolve()))
from bench_row_ops import EPS, H, R, random_bf16  # noqa: E402

from audit.core.inputs import packed_index  # noqa: E402
from rl_kernel_ops import _build, cuda_rows  # noqa: E402

_build.load_extension()
ops = torch.ops.rl_kernel_ops
tile = int(sys.argv[1]) if len(sys.argv) > 1 else 30
S = 4097
torch.manual_seed(S)
x, w = random_bf16((S, H), 2.0), (0.5 + torch.rand(H, device="cuda")).to(torch.bfloat16)
sc, g = random_bf16((R, H), 0.1), random_bf16((S, H))
idx = packed_index(3, S).cuda()
_, rstd = ops.norm_modulate_fwd(x, w, sc, sc, idx, EPS)
plan = (*cuda_rows._plan(ops, idx, R), cuda_rows.TILE_ROWS)
for _ in range(2):
    ops.norm_modulate_bwd(g, x, rstd, w, sc, idx, *plan, 4)
torch.cuda.synchronize()
os.environ["RLK_PULL_TRACE"] = str(tile)
ops.norm_modulate_bwd(g, x, rstd, w, sc, idx, *plan, 4)
torch.cuda.synchronize()
t = ops.norm_modulate_pull_trace(x).tolist()  # [rank][event][index]
stamps = [v for r in t for e in r for v in e if v]
t0 = min(stamps)


def us(v):
    return (v - t0) / 1e3 if v else float("nan")


names = ("issued", "told", "w0 waits", "w0 sums", "w0 dx", "w4 waits")
print(f"tile {tile}, us from the first stamp; per group g: block k: " + " / ".join(names))
steps = {"load (issued->told)": [], "told->w0 waits": [], "w0 sums": [], "w0 dx": [], "group (w0 waits)": []}
for grp in range(16):
    line = f"g {grp:2d}"
    for k in range(4):
        line += " | " + " ".join(f"{us(t[k][e][grp]):6.1f}" for e in range(6))
        if t[k][0][grp] and t[k][1][grp]:
            steps["load (issued->told)"].append(us(t[k][1][grp]) - us(t[k][0][grp]))
        if t[k][2][grp] and t[k][3][grp]:
            steps["w0 sums"].append(us(t[k][3][grp]) - us(t[k][2][grp]))
        if t[k][3][grp] and t[k][4][grp]:
            steps["w0 dx"].append(us(t[k][4][grp]) - us(t[k][3][grp]))
        if grp and t[k][2][grp] and t[k][2][grp - 1]:
            steps["group (w0 waits)"].append(us(t[k][2][grp]) - us(t[k][2][grp - 1]))
    told = [t[k][1][grp] for k in range(4) if t[k][1][grp]]
    waits = [t[k][2][grp] for k in range(4) if t[k][2][grp]]
    if told and waits:
        steps["told->w0 waits"].append((min(waits) - max(told)) / 1e3)
    print(line, flush=True)
for name, v in steps.items():
    if v:
        print(f"median {name}: {statistics.median(v):.2f} us over {len(v)}")
