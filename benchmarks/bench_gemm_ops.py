"""Latency of rl_kernel_ops' GEMM ops (timestep_mlp, adaln_projection) against the eager cuBLAS path.

For T = 1, 64, 2048 (MiniMax-H3 sizes): forward, and forward + backward with every input requiring
grad, for our CUDA kernels and for eager PyTorch (TF32 off). Median of CUDA-event samples after
warm-up. Prints the ratios (ours / cuBLAS) and writes JSON naming the GPU, torch and CUDA.

Usage (repository root, package importable: `pip install -e .` or PYTHONPATH=.):
    python benchmarks/bench_gemm_ops.py [--out bench_gemm_ops.json] [--sizes 1,64,2048]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import rl_kernel_ops
from audit.inputs import draw_grad_out, draw_inputs
from audit.ops import get_op
from bench_common import machine, median_ms

EAGER = {
    "timestep_mlp": lambda x, w1, b1, w2, b2: F.linear(F.silu(F.linear(x, w1, b1)), w2, b2),
    "adaln_projection": lambda temb, w, b: F.linear(F.silu(temb).to(torch.bfloat16), w, b),
}


def median_us(fn, warmup: int, iters: int) -> float:
    return median_ms(fn, warmup, iters) * 1000.0


def op_inputs(op: str, rows: int):
    """The audit's inputs of ``op`` for ``rows`` rows (seed 3, in the op's input order) on the GPU,
    its upstream gradient, our op and the eager cuBLAS composition."""
    spec = get_op(op)
    inputs = [t.cuda() for t in draw_inputs(spec, rows, 3).values()]
    return inputs, draw_grad_out(spec, rows, 3).cuda(), getattr(rl_kernel_ops, op), EAGER[op]


def measure(fn, inputs, g, warmup: int, iters: int) -> dict[str, float]:
    leaves = [t.detach().requires_grad_() for t in inputs]

    def fwd():
        with torch.no_grad():
            fn(*inputs)

    def fwd_bwd():
        torch.autograd.grad(fn(*leaves), leaves, g)

    return {"fwd_us": median_us(fwd, warmup, iters), "fwd_bwd_us": median_us(fwd_bwd, warmup, iters)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench_gemm_ops.json"))
    parser.add_argument("--sizes", default="1,64,2048")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iters", type=int, default=50)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[str, dict] = {}
    for op in ("timestep_mlp", "adaln_projection"):
        results[op] = {}
        for rows in sizes:
            inputs, g, ours, eager = op_inputs(op, rows)
            mine = measure(ours, inputs, g, args.warmup, args.iters)
            cublas = measure(eager, inputs, g, args.warmup, args.iters)
            entry = {
                "rl_kernel": mine,
                "cublas_eager": cublas,
                "ratio_fwd": mine["fwd_us"] / cublas["fwd_us"],
                "ratio_fwd_bwd": mine["fwd_bwd_us"] / cublas["fwd_bwd_us"],
            }
            results[op][str(rows)] = entry
            print(
                f"{op:17s} T={rows:5d}  fwd {mine['fwd_us']:9.1f} us vs cuBLAS {cublas['fwd_us']:9.1f} us"
                f" (x{entry['ratio_fwd']:.2f})   fwd+bwd {mine['fwd_bwd_us']:9.1f} us vs"
                f" {cublas['fwd_bwd_us']:9.1f} us (x{entry['ratio_fwd_bwd']:.2f})",
                flush=True,
            )
            del inputs, g
            torch.cuda.empty_cache()
    report = {
        "benchmark": "bench_gemm_ops",
        **machine(),
        "tf32": False,
        "timing": f"median of {args.iters} CUDA-event samples after {args.warmup} warm-ups",
        "targets": {"timestep_mlp": "fwd+bwd at T=2048 within 1.5x of cuBLAS FP32",
                    "adaln_projection": "fwd+bwd at T=2048 within 2x of cuBLAS"},
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "results": results,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
