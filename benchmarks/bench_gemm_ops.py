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
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import rl_kernel_ops


def rn(seed: int, salt: int, shape, dtype, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed * 1000 + salt)
    return (torch.randn(shape, generator=g) * scale).to(dtype).cuda()


def median_us(fn, warmup: int, iters: int) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(samples)


def op_inputs(op: str, rows: int):
    if op == "timestep_mlp":
        f32 = torch.float32
        x = rn(3, 2, (rows, 256), f32)
        params = [rn(1, 3, (5376, 256), f32, 256**-0.5), rn(1, 4, (5376,), f32, 0.02),
                  rn(1, 5, (2688, 5376), f32, 5376**-0.5), rn(1, 6, (2688,), f32, 0.02)]
        g = rn(3, 20, (rows, 2688), f32)
        eager = lambda x, w1, b1, w2, b2: F.linear(F.silu(F.linear(x, w1, b1)), w2, b2)  # noqa: E731
        return [x, *params], g, rl_kernel_ops.timestep_mlp, eager
    temb = rn(3, 7, (rows, 2688), torch.float32)
    params = [rn(1, 8, (96768, 2688), torch.bfloat16, 2688**-0.5), rn(1, 9, (96768,), torch.bfloat16, 0.02)]
    g = rn(3, 21, (rows, 96768), torch.bfloat16)
    eager = lambda t, w, b: F.linear(F.silu(t).to(torch.bfloat16), w, b)  # noqa: E731
    return [temb, *params], g, rl_kernel_ops.adaln_projection, eager


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
        "gpu": torch.cuda.get_device_name(),
        "capability": list(torch.cuda.get_device_capability()),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
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
