"""norm_modulate's forward: HEAD's one-block-per-row kernel (setting 0) against the persistent
attempt (RLK_FWD_PERSIST="blocks per SM,slots"; or the knob named by argv[4]), in one process.
For each S: bits of out and rstd
(norm_modulate_fwd) and of out, rstd, perm, seg_start, tile_start (norm_modulate_fwd_plan) against
setting 0, and graphed medians (15 samples of 20 replays) of the no-grad forward, the plan forward
and fwd+bwd through cuda_rows.norm_modulate."""

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path("benchmarks").resolve()))
from bench_common import median_ms  # noqa: E402
from bench_row_ops import EPS, H, R, captured, random_bf16  # noqa: E402

from audit.core.inputs import packed_index  # noqa: E402
from rl_kernel_ops import _build, cuda_rows  # noqa: E402
from rl_kernel_ops.reference_rows import TILE_ROWS  # noqa: E402

_build.load_extension()
ops = torch.ops.rl_kernel_ops
sizes = [int(s) for s in sys.argv[1].split(",")]
settings = sys.argv[2].split(";")
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 1
knob = sys.argv[4] if len(sys.argv) > 4 else "RLK_FWD_PERSIST"


def bits(ts):
    return [
        t.view(torch.int16) if t.dtype == torch.bfloat16 else t.view(torch.int32) if t.dtype == torch.float32 else t
        for t in ts
    ]


for S in sizes:
    torch.manual_seed(S)
    x, w = random_bf16((S, H), 2.0), (0.5 + torch.rand(H, device="cuda")).to(torch.bfloat16)
    sh, sc, g = random_bf16((R, H), 0.1), random_bf16((R, H), 0.1), random_bf16((S, H))
    idx = packed_index(3, S).cuda()
    leaves = [t.detach().requires_grad_() for t in (x, w, sh, sc)]
    ref = None
    for rep in range(reps):
        for setting in settings:
            os.environ[knob] = setting
            got = list(ops.norm_modulate_fwd(x, w, sh, sc, idx, EPS))
            if S <= 8192:
                got += list(ops.norm_modulate_fwd_plan(x, w, sh, sc, idx, EPS, TILE_ROWS))
            torch.cuda.synchronize()
            got = bits(got)
            if ref is None:
                ref = got
            same = all(torch.equal(a, b) for a, b in zip(got, ref))

            def fwd():
                return ops.norm_modulate_fwd(x, w, sh, sc, idx, EPS)

            def fwd_plan():
                return ops.norm_modulate_fwd_plan(x, w, sh, sc, idx, EPS, TILE_ROWS)

            def step():
                return torch.autograd.grad(cuda_rows.norm_modulate(*leaves, idx, EPS), leaves, g)

            t = {"fwd": median_ms(captured(fwd), warmup=5, iters=15, calls=20) * 1000}
            if S <= 8192:
                t["fwd_plan"] = median_ms(captured(fwd_plan), warmup=5, iters=15, calls=20) * 1000
            t["fwd+bwd"] = median_ms(captured(step), warmup=5, iters=15, calls=20) * 1000
            print(
                f"S={S:6d} setting={setting:6s} bits {'same' if same else 'DIFFER'} | "
                + " | ".join(f"{k} {v:7.1f} us" for k, v in t.items()),
                flush=True,
            )
