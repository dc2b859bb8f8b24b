"""adaln_projection's small-T forward: the wgmma kernel variants side by side, on the GPU.

For each variant V of the wgmma forward (0: the default, 1..3: linear_bias's kernels, 4: the
W-streaming kernel of gemm_wgmma_bf16.cuh) and T = 1..8: `out` bitwise equal to variant 1 (the
kernel the default ran for T <= 64 before the W-streaming kernel) and to the mma.sync kernel, `a`
bitwise equal to eager `silu(temb).to(bf16)`, both repeatable; every row of the T = 8 batch (and
of the reversed batch) equal to that row alone. Then
forward times at T = 1, 3, 8, in rounds (every variant and eager cuBLAS once per round, the median
of the rounds kept): the raw op with one call per CUDA-event sample (host launch time inside, as
bench_gemm_ops.py times) and with 10 back-to-back calls per sample (device time), the
rl_kernel_ops.adaln_projection wrapper the same way (and, as the wrapper ran before, through the
autograd Function with variant 1), eager `linear(silu(temb).to(bf16), w, b)` the
same way; and the fraction of the measured copy bandwidth that reading W once reaches. Last, the
host time of the wrapper's pieces (perf_counter, no synchronisation).

Usage (repository root, PYTHONPATH=.):
    python docs/evidence/h200/check_adaln_smallt.py [--variants 0,1,4] [--json OUT] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from bench_common import copy_bandwidth, machine, median_ms  # noqa: E402

import rl_kernel_ops  # noqa: E402
from rl_kernel_ops import _build  # noqa: E402
from rl_kernel_ops.reference_gemm import check_adaln_projection_args  # noqa: E402

N, D = 96768, 2688


def rn(seed: int, salt: int, shape, dtype, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed * 1000 + salt)
    return (torch.randn(shape, generator=g) * scale).to(dtype).cuda()


def differing(a: torch.Tensor, b: torch.Tensor) -> int:
    if a.shape != b.shape:
        return -1
    return int((a.view(torch.int16) != b.view(torch.int16)).sum())


def host_us(fn, n: int = 300) -> float:
    """Median host time of one call (no synchronisation inside; the queue is drained every 20)."""
    samples = []
    for i in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
        if i % 20 == 19:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return statistics.median(samples) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--variants", default="0,1,4")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    variants = [int(v) for v in args.variants.split(",")]
    torch.backends.cuda.matmul.allow_tf32 = False
    _build.load_extension()
    ops = torch.ops.rl_kernel_ops
    copy_gbs = copy_bandwidth(10, 50)
    print(f"device-to-device copy: {copy_gbs:.0f} GB/s", flush=True)
    w = rn(1, 8, (N, D), torch.bfloat16, D**-0.5)
    b = rn(1, 9, (N,), torch.bfloat16, 0.02)
    pool = rn(3, 7, (8, D), torch.float32)
    report: dict = {**machine(), "copy_gbs": copy_gbs, "bitwise": {}, "timing_us": {}, "host_us": {}}

    def run(v, t):
        return ops.adaln_proj_forward_wgmma(t, w, b, v)[0]

    def run_a(v, t):
        return ops.adaln_proj_forward_wgmma(t, w, b, v)[1]

    ok = True
    for v in variants:
        bad = {}
        for T in range(1, 9):
            t = pool[:T]
            o = run(v, t)
            d1 = differing(o, run(1, t))
            dm = differing(o, ops.adaln_proj_forward(t, w, b)[0])
            dr = differing(o, run(v, t))
            da = differing(run_a(v, t), F.silu(t).to(torch.bfloat16))
            if d1 or dm or dr or da:
                bad[T] = (d1, dm, dr, da)
        full = run(v, pool)
        rows = sum(differing(run(v, pool[i : i + 1]), full[i : i + 1]) != 0 for i in range(8))
        rev = differing(run(v, pool.flip(0)).flip(0), full)
        report["bitwise"][v] = {"differing_T": bad, "rows_alone_differing": rows, "reversed_differing": rev}
        ok &= not bad and rows == 0 and rev == 0
        print(
            f"variant {v}: out bitwise vs v1 / mma / repeat, a vs eager silu, at T=1..8: {'equal' if not bad else bad};"
            f" rows alone differing {rows}; reversed {rev}",
            flush=True,
        )

    fns = {f"v{v}": (lambda t, v=v: run(v, t)) for v in variants}
    fns["wrapper"] = lambda t: rl_kernel_ops.adaln_projection(t, w, b)
    from rl_kernel_ops.cuda_gemm import AdalnProjection, _check_cuda_layout

    def old_path(t):  # timed with RL_KERNEL_OPS_ADALN_WGMMA_VARIANT=1 set around it
        check_adaln_projection_args(t, w, b)
        _check_cuda_layout({"D": w.shape[1], "N": w.shape[0]}, temb=t, w=w, b=b)
        return AdalnProjection.apply(t, w, b)

    fns["fn_v1"] = old_path
    fns["cublas"] = lambda t: F.linear(F.silu(t).to(torch.bfloat16), w, b)
    wbytes = w.numel() * w.element_size()
    with torch.no_grad():
        for T in (1, 3, 8):
            t = pool[:T]
            samples = {k: {"call": [], "b2b": []} for k in fns}
            for _ in range(args.rounds):
                for k, fn in fns.items():
                    if k == "fn_v1":
                        os.environ["RL_KERNEL_OPS_ADALN_WGMMA_VARIANT"] = "1"
                    samples[k]["call"].append(median_ms(lambda: fn(t), 3, 15) * 1e3)
                    samples[k]["b2b"].append(median_ms(lambda: fn(t), 1, 5, calls=10) * 1e3)
                    os.environ.pop("RL_KERNEL_OPS_ADALN_WGMMA_VARIANT", None)
            row = {}
            for k, s in samples.items():
                call, b2b = statistics.median(s["call"]), statistics.median(s["b2b"])
                row[k] = {
                    "call_us": call,
                    "b2b_us": b2b,
                    "copy_fraction_b2b": wbytes / b2b / 1e3 / copy_gbs,
                    "rounds_call": s["call"],
                    "rounds_b2b": s["b2b"],
                }
            report["timing_us"][T] = row
            cub = row["cublas"]
            print(f"T={T}: (us; one call per sample / 10 back-to-back; W read at % of copy bandwidth)", flush=True)
            for k, r in row.items():
                print(
                    f"  {k:8s} {r['call_us']:7.1f} / {r['b2b_us']:7.1f}  {100 * r['copy_fraction_b2b']:5.1f} %"
                    f"  x{r['call_us'] / cub['call_us']:.2f} / x{r['b2b_us'] / cub['b2b_us']:.2f} of cuBLAS",
                    flush=True,
                )

        t = pool[:1]
        from rl_kernel_ops.cuda_gemm import adaln_forward_kernel

        pieces = {
            "wrapper": lambda: rl_kernel_ops.adaln_projection(t, w, b),
            "raw_op_v1": lambda: run(1, t),
            "raw_op_v4": lambda: run(4, t),
            "cublas_eager": lambda: F.linear(F.silu(t).to(torch.bfloat16), w, b),
            "check_adaln_projection_args": lambda: check_adaln_projection_args(t, w, b),
            "adaln_forward_kernel": lambda: adaln_forward_kernel(w),
            "get_device_capability": lambda: torch.cuda.get_device_capability(w.device),
            "empty_like": lambda: torch.empty(1, N, dtype=torch.bfloat16, device="cuda"),
        }
        for k, fn in pieces.items():
            report["host_us"][k] = host_us(fn)
        print("host us per call: " + ", ".join(f"{k} {v:.1f}" for k, v in report["host_us"].items()), flush=True)
    report["all_checks_pass"] = bool(ok)
    print(f"ALL CHECKS PASS: {ok}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
