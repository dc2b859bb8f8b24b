"""When each tile's cluster ran, from the %globaltimer stamps of ../rows_cluster3/call3_groups_attempt.diff
(norm_modulate_bwd variant 4 under RLK_TRACE; the stamps of ../rows_cluster3/trace_cluster.py) at each
S in argv[1] (bench_row_ops' H and table rows): per tile, its rows and the first and last stamp of
any of its blocks, in µs from the launch's first stamp, sorted by start; then how many tiles had
started by each 5 µs, which shows whether every cluster was resident from the start."""

import os
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
    spans = []
    for tile in range(real):
        stamps = tr[tile][tr[tile] > 0]
        rows = int((tr[tile, 0, :64, 0] > 0).sum())
        if stamps.numel():
            spans.append(((int(stamps.min()) - t0) / 1e3, (int(stamps.max()) - t0) / 1e3, tile, rows))
    spans.sort()
    end = max(s[1] for s in spans)
    print(f"S={S}: {real} tiles, {len(spans)} traced, last stamp {end:.1f} us")
    for start, stop, tile, rows in spans:
        print(f"  tile {tile:3d} rows {rows:2d} start {start:6.1f} end {stop:6.1f} took {stop - start:5.1f} us")
    started = [sum(1 for s in spans if s[0] <= t) for t in range(0, int(end) + 5, 5)]
    print("  tiles started by 0, 5, 10, ... us: " + " ".join(str(n) for n in started), flush=True)
