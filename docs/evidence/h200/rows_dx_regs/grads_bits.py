"""sha256 of norm_modulate's output and every gradient through cuda_rows.norm_modulate (fwd+bwd,
the path bench_row_ops times) at several S and H, for comparing knob settings across processes;
each S twice, eagerly and replayed from a CUDA graph."""

import hashlib
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path("benchmarks").resolve()))
from bench_row_ops import EPS, R, captured, random_bf16  # noqa: E402

from audit.core.inputs import packed_index  # noqa: E402
from rl_kernel_ops import _build, cuda_rows  # noqa: E402

_build.load_extension()
h = hashlib.sha256()
for S in (1, 64, 257, 1024, 2048, 3000, 4097, 8192):
    for H in (8, 1032, 5376, 6144):
        torch.manual_seed(S * 7 + H)
        x, w = random_bf16((S, H), 2.0), (0.5 + torch.rand(H, device="cuda")).to(torch.bfloat16)
        sh, sc, g = random_bf16((R, H), 0.1), random_bf16((R, H), 0.1), random_bf16((S, H))
        idx = packed_index(3, S).cuda()
        leaves = [t.detach().requires_grad_() for t in (x, w, sh, sc)]
        results = []

        def step():
            out = cuda_rows.norm_modulate(*leaves, idx, EPS)
            results.append([out.detach(), *torch.autograd.grad(out, leaves, g)])

        step()
        if S == 4097 and H == 5376:
            replay = captured(step)
            replay()
        torch.cuda.synchronize()
        for outs in (results[0], results[-1]):
            for t in outs:
                h.update(t.cpu().contiguous().view(torch.uint8).numpy().tobytes())
print(sys.argv[1], h.hexdigest(), flush=True)
