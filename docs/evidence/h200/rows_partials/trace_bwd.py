"""The overlapped backward at S (argv) on its own: times with every block (skip 0), partial blocks
only (1: dx blocks return at once) and dx blocks only (2); then one traced launch (%globaltimer at
each block's start and end, its SM) and where the time goes."""

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path("docs/evidence/h200/rows_graphed").resolve()))
from probe_fused_layouts import EPS, H, R, random_bf16, same_bits, us  # noqa: E402

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
    real = int(plan[2][-1])
    d0, p0 = ops.norm_modulate_bwd(g, x, rstd, w, sc, idx, *plan, 2)
    line = f"S={S} tiles {real}:"
    for skip in (0, 1, 2):
        os.environ["RLK_SKIP"] = str(skip)
        t = us(lambda: ops.norm_modulate_bwd(g, x, rstd, w, sc, idx, *plan, 2))  # noqa: B023
        line += f" skip{skip} {t:.1f} us"
    os.environ["RLK_SKIP"] = "0"
    print(line, flush=True)
    for rep in range(3):
        os.environ["RLK_TRACE_FILE"] = "/tmp/trace.bin"
        d, p = ops.norm_modulate_bwd(g, x, rstd, w, sc, idx, *plan, 2)
        del os.environ["RLK_TRACE_FILE"]
        assert same_bits(d, d0) and same_bits(p[:, :real], p0[:, :real])
        tr = torch.frombuffer(bytearray(Path("/tmp/trace.bin").read_bytes()), dtype=torch.int64).view(-1, 4)
        tr = tr[tr[:, 3] != 2]
        t0 = tr[:, 0].min()
        start, end = (tr[:, 0] - t0).double() / 1000, (tr[:, 1] - t0).double() / 1000
        span = float(end.max())
        out = f"  trace {rep}: span {span:.1f} us, SMs {tr[:, 2].unique().numel()}"
        for kind, name in ((0, "partial"), (1, "dx")):
            m = tr[:, 3] == kind
            s, e = start[m], end[m]
            dur = e - s
            q = lambda v: "/".join(f"{float(v.quantile(f)):.1f}" for f in (0.0, 0.5, 1.0))  # noqa: E731
            out += f" | {name} n={int(m.sum())} start {q(s)} end {q(e)} dur {q(dur)}"
        print(out, flush=True)
        if rep == 2:
            buckets = 12
            row = "  alive per SM over the span (partial/dx):"
            for b in range(buckets):
                mid = (b + 0.5) * span / buckets
                alive = (start <= mid) & (end >= mid)
                pa = float((alive & (tr[:, 3] == 0)).sum()) / 132
                da = float((alive & (tr[:, 3] == 1)).sum()) / 132
                row += f" {mid:.0f}:{pa:.1f}/{da:.1f}"
            print(row, flush=True)
