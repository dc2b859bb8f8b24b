"""Where adaln_projection's fwd+bwd spends its device time, ours against eager cuBLAS.

For each T: one forward and backward (every input requiring grad, bench_gemm_ops.py's inputs) under
torch.profiler, after warm-up, `--iters` times; prints each CUDA kernel's device time per
iteration (summed over its launches), largest first, and the total, for both. A probe for
choosing the next kernel step, not a benchmark: the profiler's own overhead is inside the times.

Usage (repository root, PYTHONPATH=.):
    python docs/evidence/h200/probe_adaln_fwd_bwd.py [--sizes 2048,8192] [--iters 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from bench_common import kernel_times_us, machine  # noqa: E402
from bench_gemm_ops import op_inputs  # noqa: E402


def kernel_times(fn, inputs, g, iters: int) -> dict[str, float]:
    """Device microseconds per iteration of each kernel fwd+bwd of ``fn`` launches."""
    leaves = [t.detach().requires_grad_() for t in inputs]
    return kernel_times_us(lambda: torch.autograd.grad(fn(*leaves), leaves, g), 3, iters)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2048,8192")
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    result = {**machine(), "iters": args.iters, "times_us": {}}
    for rows in (int(s) for s in args.sizes.split(",")):
        inputs, g, ours, eager = op_inputs("adaln_projection", rows)
        result["times_us"][str(rows)] = {}
        for name, fn in (("rl_kernel", ours), ("cublas_eager", eager)):
            times = kernel_times(fn, inputs, g, args.iters)
            result["times_us"][str(rows)][name] = times
            print(f"T={rows} {name}: {sum(times.values()):9.1f} us of kernels per fwd+bwd")
            for kernel, us in times.items():
                print(f"    {us:9.1f}  {kernel}")
        del inputs, g
        torch.cuda.empty_cache()
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
