"""norm_modulate's backward kernels at S = 4097 (bench_row_ops' H, R): the split dx kernel, the split
partials kernel and norm_modulate_bwd with the variant(s) in argv, each launched twice (the second
launch of each is the one ncu profiles with --launch-skip 3)."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path("benchmarks").resolve()))
from bench_row_ops import EPS, H, R, random_bf16  # noqa: E402

from audit.core.inputs import packed_index  # noqa: E402
from rl_kernel_ops import _build, cuda_rows  # noqa: E402

_build.load_extension()
ops = torch.ops.rl_kernel_ops
S = int(sys.argv[1])
variants = [int(v) for v in sys.argv[2].split(",")]
torch.manual_seed(S)
x, w = random_bf16((S, H), 2.0), (0.5 + torch.rand(H, device="cuda")).to(torch.bfloat16)
sc, g = random_bf16((R, H), 0.1), random_bf16((S, H))
idx = packed_index(3, S).cuda()
_, rstd = ops.norm_modulate_fwd(x, w, sc, sc, idx, EPS)
plan = (*cuda_rows._plan(ops, idx, R), cuda_rows.TILE_ROWS)
for _ in range(2):
    ops.norm_modulate_bwd_dx(g, x, rstd, w, sc, idx)
    ops.norm_modulate_bwd_partials(g, x, rstd, w, sc, *plan)
    for v in variants:
        ops.norm_modulate_bwd(g, x, rstd, w, sc, idx, *plan, v)
torch.cuda.synchronize()
