"""norm_modulate's forward at S = 4097 (bench_row_ops' H, R): the no-grad kernel and the
plan-sorting one, each launched twice (ncu profiles the second launches with --launch-skip 2)."""

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
torch.manual_seed(0)
x, w = random_bf16((S, H), 2.0), (0.5 + torch.rand(H, device="cuda")).to(torch.bfloat16)
sh, sc = random_bf16((R, H), 0.1), random_bf16((R, H), 0.1)
idx = packed_index(3, S).cuda()
for _ in range(2):
    ops.norm_modulate_fwd(x, w, sh, sc, idx, EPS)
    ops.norm_modulate_fwd_plan(x, w, sh, sc, idx, EPS, cuda_rows.TILE_ROWS)
torch.cuda.synchronize()
