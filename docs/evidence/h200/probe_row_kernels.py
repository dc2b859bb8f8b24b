"""Where rl_kernel's norm_modulate fwd+bwd spends its device time, kernel by kernel.

bench_row_ops.py's inputs (H = 5376, 9 table rows, the audit's index) at each S: one forward and
backward with every input requiring grad, under torch.profiler after warm-up, `--iters` times;
prints each CUDA kernel's device time per iteration (summed over its launches), largest first,
and the total. A probe for choosing the next kernel step, not a benchmark.

Usage (repository root, PYTHONPATH=.):
    python docs/evidence/h200/probe_row_kernels.py [--sizes 4097,32768] [--iters 5] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from bench_common import kernel_times_us, machine  # noqa: E402
from bench_row_ops import EPS, H, R, random_bf16  # noqa: E402

from audit.core.inputs import packed_index  # noqa: E402
from rl_kernel_ops import cuda_rows  # noqa: E402


def kernel_times(rows: int, iters: int) -> dict[str, float]:
    """Device microseconds per fwd+bwd of each kernel norm_modulate launches at ``rows`` rows."""
    x, w = random_bf16((rows, H), 2.0), (0.5 + torch.rand(H, device="cuda")).to(torch.bfloat16)
    sh, sc, g = random_bf16((R, H), 0.1), random_bf16((R, H), 0.1), random_bf16((rows, H))
    idx = packed_index(3, rows).cuda()
    leaves = [t.detach().requires_grad_() for t in (x, w, sh, sc)]

    def step():
        torch.autograd.grad(cuda_rows.norm_modulate(*leaves, idx, EPS), leaves, g)

    return kernel_times_us(step, 5, iters)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4097,32768")
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = {**machine(), "iters": args.iters, "times_us": {}}
    for rows in (int(s) for s in args.sizes.split(",")):
        times = kernel_times(rows, args.iters)
        result["times_us"][str(rows)] = times
        print(f"S={rows}: {sum(times.values()):8.1f} us of kernels per fwd+bwd")
        for kernel, us in times.items():
            print(f"    {us:8.1f}  {kernel}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
