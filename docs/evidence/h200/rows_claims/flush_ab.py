"""norm_modulate at S (bench_row_ops' inputs), graphed: fwd+bwd back to back, and with a 256 MB
memset between the forward and the backward (the L2 holds none of the forward's lines when the
backward starts), minus the memset alone. Median of 15 samples of 20 replays."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path("benchmarks").resolve()))
from bench_common import median_ms  # noqa: E402
from bench_row_ops import EPS, H, R, captured, random_bf16  # noqa: E402

from audit.core.inputs import packed_index  # noqa: E402
from rl_kernel_ops import _build, cuda_rows  # noqa: E402

_build.load_extension()
S = int(sys.argv[2])
torch.manual_seed(0)
x, w = random_bf16((S, H), 2.0), (0.5 + torch.rand(H, device="cuda")).to(torch.bfloat16)
sh, sc, g = random_bf16((R, H), 0.1), random_bf16((R, H), 0.1), random_bf16((S, H))
idx = packed_index(3, S).cuda()
leaves = [t.detach().requires_grad_() for t in (x, w, sh, sc)]
junk = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")


def step():
    return torch.autograd.grad(cuda_rows.norm_modulate(*leaves, idx, EPS), leaves, g)


def flushed_step():
    out = cuda_rows.norm_modulate(*leaves, idx, EPS)
    junk.fill_(1)
    return torch.autograd.grad(out, leaves, g)


def flush():
    junk.fill_(1)


us = {
    n: median_ms(captured(f), warmup=5, iters=15, calls=20) * 1000
    for n, f in (("back_to_back", step), ("flushed", flushed_step), ("flush", flush))
}
print(
    f"{sys.argv[1]:6s} S={S} graphed fwd+bwd: back to back {us['back_to_back']:.1f} | with L2 flushed between "
    f"{us['flushed'] - us['flush']:.1f} (flushed {us['flushed']:.1f} - flush alone {us['flush']:.1f}) us",
    flush=True,
)
