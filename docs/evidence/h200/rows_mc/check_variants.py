"""norm_modulate_bwd with each variant in argv[1] (comma-separated) against the split pair
(norm_modulate_bwd_dx, norm_modulate_bwd_partials), bitwise, at the row counts and widths of
tests/cuda/test_rl_kernel_rows.py's backward test, twice each; inputs drawn on the GPU. One line
per shape, a last line with the count of shapes where any variant differs; exit 1 if any."""

import sys

import torch

from audit.core.inputs import packed_index
from rl_kernel_ops import _build, cuda_rows

_build.load_extension()
ops = torch.ops.rl_kernel_ops
BF16, R, EPS = torch.bfloat16, 9, 1e-5
variants = [int(v) for v in sys.argv[1].split(",")]
bad = 0
for rows in (1, 64, 257, 1024, 4097, 32768):
    for hidden in (8, 1032, 5376, 6144, 6152, 16384):
        gen = torch.Generator(device="cuda").manual_seed(rows + hidden)

        def draw(*shape, scale=1.0):
            return (torch.randn(*shape, generator=gen, device="cuda") * scale).to(BF16)

        x, g = draw(rows, hidden, scale=2.0), draw(rows, hidden)
        w = (0.5 + torch.rand(hidden, generator=gen, device="cuda")).to(BF16)
        shift, scale = draw(R, hidden, scale=0.1), draw(R, hidden, scale=0.1)
        idx = packed_index(3, rows).cuda()
        _, rstd = ops.norm_modulate_fwd(x, w, shift, scale, idx, EPS)
        plan = (*cuda_rows._plan(ops, idx, R), cuda_rows.TILE_ROWS)
        real = int(plan[2][-1])
        dx = ops.norm_modulate_bwd_dx(g, x, rstd, w, scale, idx)
        partials = ops.norm_modulate_bwd_partials(g, x, rstd, w, scale, *plan)[:, :real]
        line = f"rows {rows:6d} hidden {hidden:6d} tiles {real:4d}:"
        shape_bad = False
        for v in variants:
            same = True
            for _ in range(2):
                d, p = ops.norm_modulate_bwd(g, x, rstd, w, scale, idx, *plan, v)
                torch.cuda.synchronize()
                same &= torch.equal(d.view(torch.int16), dx.view(torch.int16))
                same &= torch.equal(p[:, :real].view(torch.int32), partials.view(torch.int32))
            line += f" v{v} {'same' if same else 'DIFFERENT BITS'}"
            shape_bad |= not same
        bad += shape_bad
        print(line, flush=True)
print(f"{bad} shapes differ", flush=True)
sys.exit(1 if bad else 0)
