"""adaln_projection's wgmma/TMA backward (issue 13, steps 3 and 4) against the mma.sync backward, on the GPU.

1. Bitwise, T = 1, 4, 63, 64, 65, 128, 129, 256, 257, 2048, 8192: d_temb, dw, db of the wgmma
   backward vs the mma.sync backward (differing elements), and a repeat of the wgmma backward;
   dgrad's three tiles (variants 1..3) vs mma.sync at T = 64, 257 and 2048.
2. Batch invariance of d_temb (wgmma): rows alone and slices vs the same rows of the 8192-row
   batch; the reversed batch.
3. Times (median of CUDA-event samples) of the backward alone at T = 1, 64, 256, 2048, 8192:
   wgmma, mma.sync, each one's dgrad and wgrad alone, and wgmma's dgrad with each tile forced at
   T = 64, 256, 2048, with TFLOP/s (2 GEMMs of 2*T*N*D flops each).

Inputs are drawn on the GPU (torch.Generator on cuda, seeds fixed). Exits 1 when a check fails.

Usage (repository root, PYTHONPATH=.):
    python docs/evidence/h200/check_adaln_wgmma_bwd.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from bench_common import machine, median_ms  # noqa: E402

from rl_kernel_ops import _build  # noqa: E402
from rl_kernel_ops.reference_gemm import ADALN_SPLITS_DGRAD, ROW_CHUNK  # noqa: E402

N, D = 96768, 2688
SIZES = (1, 4, 63, 64, 65, 128, 129, 256, 257, 2048, 8192)
TIMED = (1, 64, 256, 2048, 8192)


def rn(seed: int, shape, dtype, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(shape, generator=g, device="cuda") * scale).to(dtype)


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.int32) if t.dtype == torch.float32 else t.view(torch.int16)


def differing(a: torch.Tensor, b: torch.Tensor) -> int:
    if a.shape != b.shape:
        return -1
    return int((bits(a) != bits(b)).sum())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    _build.load_extension()
    ops = torch.ops.rl_kernel_ops
    w = rn(1008, (N, D), torch.bfloat16, D**-0.5)
    b = rn(1009, (N,), torch.bfloat16, 0.02)
    temb = rn(3007, (max(SIZES), D), torch.float32)
    dout = rn(3021, (max(SIZES), N), torch.bfloat16)
    a = ops.adaln_proj_forward(temb, w, b)[1]
    names = ("d_temb", "dw", "db")

    def old(T, needs=(True, True, True)):
        return ops.adaln_proj_backward(dout[:T], temb[:T], a[:T], w, ADALN_SPLITS_DGRAD, ROW_CHUNK, *needs)

    def new(T, variant=0, needs=(True, True, True), lo=0):
        sl = slice(lo, lo + T)
        return ops.adaln_proj_backward_wgmma(
            dout[sl], temb[sl], a[sl], w, ADALN_SPLITS_DGRAD, ROW_CHUNK, *needs, variant
        )

    report: dict = {**machine(), "splits_dgrad": ADALN_SPLITS_DGRAD, "row_chunk": ROW_CHUNK}
    ok = True

    # 1. bitwise vs mma.sync
    report["bitwise"] = {}
    for T in SIZES:
        o, n1, n2 = old(T), new(T), new(T)
        row = {f"{nm}_differing": differing(x, y) for nm, x, y in zip(names, n1, o)}
        row.update({f"{nm}_max_abs_diff": float((x.float() - y.float()).abs().max()) for nm, x, y in zip(names, n1, o)})
        row["repeat_differing"] = sum(differing(x, y) for x, y in zip(n1, n2))
        if T in (64, 257, 2048):
            for v in (1, 2, 3):
                row[f"dgrad_variant{v}_d_temb_differing"] = differing(new(T, v, (True, False, False))[0], o[0])
        bad = [k for k, v in row.items() if k.endswith("differing") and v != 0]
        ok &= not bad
        report["bitwise"][str(T)] = row
        print(f"T={T:5d} {row}", flush=True)
        del o, n1, n2

    # 2. batch invariance of d_temb
    only = (True, False, False)
    full = new(max(SIZES), 0, only)[0]
    inv = {}
    for i in (0, 1, 63, 64, 127, 128, 4095, 8191, 1234, 5000):
        inv[f"row {i}"] = differing(new(1, 0, only, lo=i)[0], full[i : i + 1])
    for lo, hi in (
        (0, 4),
        (5, 69),
        (100, 165),
        (1000, 1128),
        (3000, 3129),
        (4000, 4257),
        (123, 2171),
        (0, 2048),
        (7000, 8192),
    ):
        inv[f"rows {lo}:{hi}"] = differing(new(hi - lo, 0, only, lo=lo)[0], full[lo:hi])
    rev = ops.adaln_proj_backward_wgmma(
        dout.flip(0).contiguous(),
        temb.flip(0).contiguous(),
        a.flip(0).contiguous(),
        w,
        ADALN_SPLITS_DGRAD,
        ROW_CHUNK,
        *only,
        0,
    )[0]
    inv["reversed 8192"] = differing(rev.flip(0), full)
    ok &= all(v == 0 for v in inv.values())
    report["batch_invariance_d_temb"] = inv
    print(f"batch invariance (d_temb elements differing vs the 8192-row batch): {inv}", flush=True)
    del full, rev

    # 3. backward times
    report["timing_bwd_us"] = {}
    for T in TIMED:
        flop = 2 * 2.0 * T * N * D
        row = {}
        for name, fn in (
            ("wgmma", lambda: new(T)),
            ("mma", lambda: old(T)),
            ("wgmma_dgrad", lambda: new(T, 0, (True, False, False))),
            ("wgmma_wgrad", lambda: new(T, 0, (False, True, False))),
            ("mma_dgrad", lambda: old(T, (True, False, False))),
            ("mma_wgrad", lambda: old(T, (False, True, False))),
        ):
            us = median_ms(fn, 3, 10) * 1000.0
            f = flop / 2 if name.endswith(("dgrad", "wgrad")) else flop
            row[name] = {"us": us, "tflops": f / us / 1e6}
        if T in (64, 256, 2048):  # dgrad's three tiles, forced
            for v in (1, 2, 3):
                us = median_ms(lambda: new(T, v, (True, False, False)), 3, 10) * 1000.0
                row[f"wgmma_dgrad_variant{v}"] = {"us": us, "tflops": flop / 2 / us / 1e6}
        report["timing_bwd_us"][str(T)] = row
        print(
            f"bwd T={T:5d}  wgmma {row['wgmma']['us']:9.1f} us ({row['wgmma']['tflops']:6.1f} TFLOP/s; dgrad "
            f"{row['wgmma_dgrad']['us']:.1f}, wgrad {row['wgmma_wgrad']['us']:.1f})  mma {row['mma']['us']:9.1f} us "
            f"({row['mma']['tflops']:6.1f}; dgrad {row['mma_dgrad']['us']:.1f}, wgrad {row['mma_wgrad']['us']:.1f})"
            + "".join(
                f"  dgrad v{v} {row[f'wgmma_dgrad_variant{v}']['us']:.1f}"
                for v in (1, 2, 3)
                if f"wgmma_dgrad_variant{v}" in row
            ),
            flush=True,
        )
    report["all_checks_pass"] = bool(ok)
    print(f"ALL CHECKS PASS: {ok}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
