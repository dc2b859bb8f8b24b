"""sha256 of norm_modulate's forward outputs (out, rstd; with the plan also perm and starts) at
several S and H, for comparing builds or RLK_FWD_MODE settings across processes."""

import hashlib
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path("benchmarks").resolve()))
from bench_row_ops import EPS, R, random_bf16  # noqa: E402

from audit.core.inputs import packed_index  # noqa: E402
from rl_kernel_ops import _build, cuda_rows  # noqa: E402

_build.load_extension()
ops = torch.ops.rl_kernel_ops
h = hashlib.sha256()
for S in (1, 257, 4097, 8192, 32768):
    for H in (8, 1032, 5376, 6144, 16384):
        if S * H > 4097 * 16384:
            continue
        torch.manual_seed(S * 7 + H)
        x, w = random_bf16((S, H), 2.0), (0.5 + torch.rand(H, device="cuda")).to(torch.bfloat16)
        sh, sc = random_bf16((R, H), 0.1), random_bf16((R, H), 0.1)
        idx = packed_index(3, S).cuda()
        outs = list(ops.norm_modulate_fwd(x, w, sh, sc, idx, EPS))
        if S <= 8192:
            outs += list(ops.norm_modulate_fwd_plan(x, w, sh, sc, idx, EPS, cuda_rows.TILE_ROWS))
        for t in outs:
            h.update(t.cpu().contiguous().view(torch.uint8).numpy().tobytes())
print(sys.argv[1], h.hexdigest())
