"""Where the clustered backward's time goes (call2_trace_attempt.diff): norm_modulate_bwd with
variant 4 at S (argv, bench_row_ops' H and table rows), launched twice untimed, then once with
RLK_TRACE set, whose %globaltimer stamps per tile, block m and row j (those a kernel takes; a step
is counted where both its stamps were taken) are: 0 the chain group has the
row's slot, 1 it has the incoming sum, 2 it has sent its sum (the last block: c), 3 the dx group
has c, 4 the dx group has written the row and refilled the slot. Prints, per S, medians over every
tile and block of the per-row steps, then every row of two tiles (µs from the kernel's first stamp)."""

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
for S in (int(s) for s in sys.argv[1].split(",")):
    torch.manual_seed(S)
    x, w = random_bf16((S, H), 2.0), (0.5 + torch.rand(H, device="cuda")).to(torch.bfloat16)
    sc, g = random_bf16((R, H), 0.1), random_bf16((S, H))
    idx = packed_index(3, S).cuda()
    _, rstd = ops.norm_modulate_fwd(x, w, sc, sc, idx, EPS)
    plan = (*cuda_rows._plan(ops, idx, R), cuda_rows.TILE_ROWS)
    for _ in range(2):
        ops.norm_modulate_bwd(g, x, rstd, w, sc, idx, *plan, 4)
    os.environ["RLK_TRACE"] = "1"
    ops.norm_modulate_bwd(g, x, rstd, w, sc, idx, *plan, 4)
    del os.environ["RLK_TRACE"]
    torch.cuda.synchronize()
    tr = ops.norm_modulate_trace(x).cpu()  # (tiles, 8, 65, 5) ns
    real = int(plan[2][-1])
    t0 = int(tr[tr > 0].min())
    us = lambda v: (int(v) - t0) / 1000  # noqa: E731
    steps = {
        "slot->sum": [],
        "sum->sent": [],
        "sent(m)->sum(m+1)": [],
        "c sent->dx has c": [],
        "c->done": [],
        "row cadence (full)": [],
        "done(j)->full(j+D)": [],
    }
    blocks = int((tr[0, :, 64, 0] > 0).sum())
    D = 14

    def add(name, later, earlier):  # a step between two stamps, where both were taken
        if later > 0 and earlier > 0:
            steps[name].append(float(later - earlier) / 1000)

    for tile in range(real):
        rows = int((tr[tile, 0, :64, 0] > 0).sum())
        for m in range(blocks):
            a = tr[tile, m]
            for j in range(rows):
                add("slot->sum", a[j, 1], a[j, 0])
                add("sum->sent", a[j, 2], a[j, 1])
                add("c->done", a[j, 4], a[j, 3])
                if m + 1 < blocks:
                    add("sent(m)->sum(m+1)", tr[tile, m + 1, j, 1], a[j, 2])
                add("c sent->dx has c", a[j, 3], tr[tile, blocks - 1, j, 2])
                if j:
                    add("row cadence (full)", a[j, 0], a[j - 1, 0])
                if j + D < rows:
                    add("done(j)->full(j+D)", a[j + D, 0], a[j, 4])
    medians = ", ".join(f"{k} {statistics.median(float(v) for v in vs):.2f}" for k, vs in steps.items() if vs)
    print(f"S={S} tiles {real} blocks {blocks} span {us(tr.max()):.1f} us; medians (us): {medians}", flush=True)
    for tile in (0, real // 2):
        rows = int((tr[tile, 0, :64, 0] > 0).sum())
        print(f"  tile {tile} ({rows} rows), per row j: for each block m full/sum/sent c/done", flush=True)
        for j in range(rows):
            print(
                f"  {j:2d} "
                + " | ".join(
                    "{:6.1f} {:6.1f} {:6.1f} {:6.1f} {:6.1f}".format(*(us(v) for v in tr[tile, m, j].tolist()))
                    for m in range(blocks)
                ),
                flush=True,
            )
