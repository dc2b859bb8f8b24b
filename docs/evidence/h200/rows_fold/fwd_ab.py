"""norm_modulate at S = 4097 (bench_row_ops' inputs), graphed (median of 15 samples of 20 replays):
the no-grad forward, the forward with grad (the plan-sorting launch), fwd+bwd; then the device
times of the kernels of the no-grad forward and of fwd+bwd (torch.profiler)."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path("benchmarks").resolve()))
from bench_common import kernel_times_us, median_ms  # noqa: E402
from bench_row_ops import EPS, H, R, captured, random_bf16  # noqa: E402

from audit.core.inputs import packed_index  # noqa: E402
from rl_kernel_ops import _build, cuda_rows  # noqa: E402

_build.load_extension()
S = int(sys.argv[2]) if len(sys.argv) > 2 else 4097
torch.manual_seed(0)
x, w = random_bf16((S, H), 2.0), (0.5 + torch.rand(H, device="cuda")).to(torch.bfloat16)
sh, sc, g = random_bf16((R, H), 0.1), random_bf16((R, H), 0.1), random_bf16((S, H))
idx = packed_index(3, S).cuda()
leaves = [t.detach().requires_grad_() for t in (x, w, sh, sc)]


def fwd_nograd():
    with torch.no_grad():
        return cuda_rows.norm_modulate(x, w, sh, sc, idx, EPS)


def fwd_grad():
    return cuda_rows.norm_modulate(*leaves, idx, EPS)


def step():
    return torch.autograd.grad(cuda_rows.norm_modulate(*leaves, idx, EPS), leaves, g)


us = {
    n: median_ms(captured(f), warmup=5, iters=15, calls=20) * 1000
    for n, f in (("fwd", fwd_nograd), ("fwd_grad", fwd_grad), ("fwd+bwd", step))
}
k_fwd = kernel_times_us(fwd_nograd, 5, 20)
k_step = kernel_times_us(step, 5, 20)
name = lambda k: k.split("(")[0].split("<")[0][-28:]  # noqa: E731
print(
    f"{sys.argv[1]:6s} S={S} graphed: fwd {us['fwd']:.1f} | fwd(grad) {us['fwd_grad']:.1f} | "
    f"fwd+bwd {us['fwd+bwd']:.1f} us"
    f" || kernels fwd: "
    + ", ".join(f"{name(k)} {v:.1f}" for k, v in k_fwd.items())
    + " | fwd+bwd: "
    + ", ".join(f"{name(k)} {v:.1f}" for k, v in k_step.items()),
    flush=True,
)
