"""norm_modulate fwd+bwd at S = 4097 (bench_row_ops' inputs), graphed (bench_row_ops.captured,
median of 15 samples of 20 replays), then its kernels' device times (torch.profiler).
`--once`: one fwd+bwd only (for ncu)."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path("benchmarks").resolve()))
from bench_common import kernel_times_us, median_ms  # noqa: E402
from bench_row_ops import EPS, H, R, captured, random_bf16  # noqa: E402

from audit.core.inputs import packed_index  # noqa: E402
from rl_kernel_ops import _build, cuda_rows  # noqa: E402

_build.load_extension()
S = 4097
torch.manual_seed(0)
x, w = random_bf16((S, H), 2.0), (0.5 + torch.rand(H, device="cuda")).to(torch.bfloat16)
sh, sc, g = random_bf16((R, H), 0.1), random_bf16((R, H), 0.1), random_bf16((S, H))
idx = packed_index(3, S).cuda()
leaves = [t.detach().requires_grad_() for t in (x, w, sh, sc)]


def step():
    return torch.autograd.grad(cuda_rows.norm_modulate(*leaves, idx, EPS), leaves, g)


if "--once" in sys.argv:
    step()
    step()
    torch.cuda.synchronize()
    sys.exit(0)
replay = captured(step)
ms = median_ms(replay, warmup=5, iters=15, calls=20)
times = kernel_times_us(step, 5, 20)
print(
    f"{sys.argv[1] if len(sys.argv) > 1 else ''} graphed fwd+bwd {ms * 1000:.1f} us; "
    f"kernels {sum(times.values()):.1f} us: "
    + ", ".join(f"{k.split('(')[0].split('<')[0][-40:]} {v:.1f}" for k, v in times.items())
)
