"""norm_modulate_bwd with variant 4 (the clustered kernel of call1_cluster3_attempt.diff, forced)
against the split pair (norm_modulate_bwd_dx, norm_modulate_bwd_partials), bitwise, at the row
counts and widths of tests/cuda/test_rl_kernel_rows.py's backward test, twice each; one line per
shape, a last line with the count of shapes that differ."""

import sys

import torch

from audit.core.inputs import packed_index
from rl_kernel_ops import _build, cuda_rows

_build.load_extension()
ops = torch.ops.rl_kernel_ops
BF16, R, EPS = torch.bfloat16, 9, 1e-5
bad = 0
for rows in (1, 64, 257, 1024, 4097, 32768):
    for hidden in (8, 1032, 5376, 6144, 6152, 16384):
        gen = torch.Generator().manual_seed(rows + hidden)
        x = (torch.randn(rows, hidden, generator=gen) * 2).to(BF16).cuda()
        w = (0.5 + torch.rand(hidden, generator=gen)).to(BF16).cuda()
        shift, scale, g = (
            (torch.randn(n, hidden, generator=gen) * s).to(BF16).cuda() for n, s in ((R, 0.1), (R, 0.1), (rows, 1))
        )
        idx = packed_index(3, rows).cuda()
        _, rstd = ops.norm_modulate_fwd(x, w, shift, scale, idx, EPS)
        plan = (*cuda_rows._plan(ops, idx, R), cuda_rows.TILE_ROWS)
        real = int(plan[2][-1])
        dx = ops.norm_modulate_bwd_dx(g, x, rstd, w, scale, idx)
        partials = ops.norm_modulate_bwd_partials(g, x, rstd, w, scale, *plan)[:, :real]
        same = True
        for _ in range(2):
            d, p = ops.norm_modulate_bwd(g, x, rstd, w, scale, idx, *plan, 4)
            torch.cuda.synchronize()
            same &= torch.equal(d.view(torch.int16), dx.view(torch.int16))
            same &= torch.equal(p[:, :real].view(torch.int32), partials.view(torch.int32))
        bad += not same
        print(
            f"rows {rows:6d} hidden {hidden:6d} tiles {real:4d}: {'same bits' if same else 'DIFFERENT BITS'}",
            flush=True,
        )
print(f"{bad} shapes differ", flush=True)
sys.exit(1 if bad else 0)
