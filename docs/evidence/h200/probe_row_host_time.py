"""H200 probe: host (CPU) time per call of rl_kernel's row ops, by piece, at S = 4097 and 32768.
Each figure is wall-clock per call over 200 calls after 20 warm-ups; "+sync" figures synchronize
after every call (GPU time included)."""

import time

import torch

import rl_kernel_ops
from audit.core.inputs import draw_grad_out, draw_inputs
from audit.core.ops import get_op
from rl_kernel_ops import cuda_rows
from rl_kernel_ops._checks import kernel_layout
from rl_kernel_ops._row_checks import check_norm_modulate

dev = torch.device("cuda")
op = get_op("norm_modulate")


def per_call_us(fn, n=200, sync=False):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
        if sync:
            torch.cuda.synchronize()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


for rows in (4097, 32768):
    t = {k: v.to(dev) for k, v in draw_inputs(op, rows, rows).items()}
    g = draw_grad_out(op, rows, rows).to(dev)
    leaves = {n: v.detach().clone().requires_grad_(n != "idx") for n, v in t.items()}
    targets = [leaves[n] for n in ("x", "w", "sh", "sc")]

    def fwd():
        return rl_kernel_ops.norm_modulate(leaves["x"], leaves["w"], leaves["sh"], leaves["sc"], leaves["idx"])

    def fwd_bwd():
        torch.autograd.grad(fwd(), targets, grad_outputs=g)

    ops = cuda_rows._ops()
    pieces = {
        "check_norm_modulate": lambda: check_norm_modulate(
            leaves["x"], leaves["w"], leaves["sh"], leaves["sc"], leaves["idx"], 1e-5
        ),
        "torch.sort(idx, stable=True)": lambda: torch.sort(leaves["idx"], stable=True),
        "_plan (sort + segment plan)": lambda: cuda_rows._plan(ops, leaves["idx"], 9),
        "forward": fwd,
        "forward + backward": fwd_bwd,
    }
    for name, fn in pieces.items():
        print(
            f"S={rows:6d} {name:30s} host {per_call_us(fn):8.1f} us/call   "
            f"+sync {per_call_us(fn, sync=True):8.1f} us/call"
        )

print("-- backward pieces, S = 4097")
rows = 4097
t = {k: v.to(dev) for k, v in draw_inputs(op, rows, rows).items()}
g = draw_grad_out(op, rows, rows).to(dev)
x, w, sh, sc, idx = (t[n] for n in ("x", "w", "sh", "sc", "idx"))
out, rstd = ops.norm_modulate_fwd(x, w, sh, sc, idx, 1e-5)
perm, seg_start, tile_start, tiles = cuda_rows._plan(ops, idx, 9)
partials = ops.norm_modulate_bwd_partials(g, x, rstd, w, sc, perm, seg_start, tile_start, tiles, cuda_rows.TILE_ROWS)
seg = ops.row_segment_fold(partials, tile_start)
leaf = torch.zeros(8, device=dev, requires_grad=True)
pieces = {
    "kernel_layout(g)": lambda: kernel_layout(g),
    "norm_modulate_bwd_dx": lambda: ops.norm_modulate_bwd_dx(g, x, rstd, w, sc, idx),
    "norm_modulate_bwd_partials": lambda: ops.norm_modulate_bwd_partials(
        g, x, rstd, w, sc, perm, seg_start, tile_start, tiles, cuda_rows.TILE_ROWS
    ),
    "row_segment_fold (3, R, H)": lambda: ops.row_segment_fold(partials, tile_start),
    "row_segment_fold (w) + casts": lambda: (
        seg[0].to(torch.bfloat16),
        seg[1].to(torch.bfloat16),
        ops.row_segment_fold(seg[2:3].contiguous(), None)[0, 0].to(torch.bfloat16),
    ),
    "autograd.grad of leaf * 2": lambda: torch.autograd.grad(leaf * 2, [leaf], grad_outputs=torch.ones(8, device=dev)),
    "whole backward by hand": lambda: (
        kernel_layout(g),
        ops.norm_modulate_bwd_dx(g, x, rstd, w, sc, idx),
        cuda_rows._plan(ops, idx, 9),
        ops.norm_modulate_bwd_partials(g, x, rstd, w, sc, perm, seg_start, tile_start, tiles, cuda_rows.TILE_ROWS),
        ops.row_segment_fold(partials, tile_start),
        seg[0].to(torch.bfloat16),
        seg[1].to(torch.bfloat16),
        ops.row_segment_fold(seg[2:3].contiguous(), None)[0, 0].to(torch.bfloat16),
    ),
}
for name, fn in pieces.items():
    print(
        f"S={rows:6d} {name:30s} host {per_call_us(fn):8.1f} us/call   +sync {per_call_us(fn, sync=True):8.1f} us/call"
    )
