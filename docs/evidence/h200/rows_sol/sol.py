"""Streaming bound at norm_modulate's shapes: the bench's minimal bytes of fwd+bwd (x read, out
written; grad and x read, dx written) moved by torch's own elementwise kernels, graphed like
bench_row_ops (20 replays, median of 15), beside the copy bandwidth of 1 GiB."""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path("benchmarks").resolve()))
from bench_common import copy_bandwidth, median_ms  # noqa: E402
from bench_row_ops import EPS, H, R, captured  # noqa: E402

from audit.core.inputs import packed_index  # noqa: E402
from rl_kernel_ops import _build  # noqa: E402

_build.load_extension()
ops = torch.ops.rl_kernel_ops

copy = copy_bandwidth(20, 100)
print(f"copy {copy:.0f} GB/s")
for S in [int(s) for s in sys.argv[1:]] or [4097]:
    x = torch.randn(S, H, device="cuda").to(torch.bfloat16)
    g, out, dx = torch.randn_like(x), torch.empty_like(x), torch.empty_like(x)
    unit = S * H * 2

    def fwd():
        out.copy_(x)

    def bwd():
        torch.add(g, x, out=dx)

    def both():
        fwd()
        bwd()

    def both3():  # with a third, tiny launch, as the fold
        fwd()
        bwd()
        out[:9].zero_()

    w = (0.5 + torch.rand(H, device="cuda")).to(torch.bfloat16)
    sh, sc = (
        (torch.randn(R, H, device="cuda") * 0.1).to(torch.bfloat16),
        (torch.randn(R, H, device="cuda") * 0.1).to(torch.bfloat16),
    )
    idx = packed_index(3, S).cuda()
    rstd = ops.norm_modulate_fwd(x, w, sh, sc, idx, EPS)[1]

    def nm_fwd():
        ops.norm_modulate_fwd(x, w, sh, sc, idx, EPS)

    def nm_dx():
        ops.norm_modulate_bwd_dx(g, x, rstd, w, sc, idx)

    for name, fn, nbytes in (
        ("fwd-like copy", fwd, 2 * unit),
        ("bwd-like add", bwd, 3 * unit),
        ("both", both, 5 * unit),
        ("both+tiny", both3, 5 * unit),
        ("nm fwd (no plan)", nm_fwd, 2 * unit),
        ("nm split dx", nm_dx, 3 * unit),
    ):
        us = median_ms(captured(fn), warmup=5, iters=15, calls=20) * 1000
        print(f"S={S} {name:14s} {us:7.1f} us  {nbytes / us / 1e3 / copy:6.1%} of copy", flush=True)
