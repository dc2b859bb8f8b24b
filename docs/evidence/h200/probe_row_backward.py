"""H200 probe for two observations of the prior-art run (run from the repository root):
1. which table/parameter gradients of diffusers and Liger change between two identical runs;
2. where rl_kernel's fwd+bwd time goes at S = 4097 vs 32768 (torch.profiler, CUDA kernels)."""

import torch
from torch.profiler import ProfilerActivity, profile

from audit.core.candidates import get_candidate, load_adapters
from audit.core.compare import bit_patterns
from audit.core.evaluate import differentiated, evaluate
from audit.core.inputs import draw_grad_out, draw_inputs
from audit.core.ops import get_op

load_adapters()
dev = torch.device("cuda")


def problem(op, rows, seed):
    return ({k: v.to(dev) for k, v in draw_inputs(op, rows, seed).items()}, draw_grad_out(op, rows, seed).to(dev))


print("== repeatability of table/parameter gradients, 2048 rows, seed 3, two runs")
for op_name, names in (
    ("norm_modulate", ("diffusers", "liger", "liger_rlk_gather", "rl_kernel")),
    ("gate_residual", ("diffusers", "rl_kernel")),
):
    op = get_op(op_name)
    inputs, g = problem(op, 2048, 3)
    for name in names:
        c = get_candidate(op_name, name)
        a, b = evaluate(c, op, inputs, g), evaluate(c, op, inputs, g)
        diff = {n: int((bit_patterns(a[1][n]) != bit_patterns(b[1][n])).sum()) for n in a[1]}
        print(f"{op_name:14s} {name:17s} differing elements per gradient: {diff}")

print("== rl_kernel fwd+bwd: CUDA time per kernel (20 calls)")
for op_name in ("norm_modulate", "gate_residual"):
    op = get_op(op_name)
    for name in ("rl_kernel", "diffusers"):
        c = get_candidate(op_name, name)
        wanted = differentiated(c, op)
        for rows in (4097, 32768):
            inputs, g = problem(op, rows, rows)
            leaves = {n: t.detach().clone().requires_grad_(n in wanted) for n, t in inputs.items()}

            def step():
                out = c.forward(leaves)
                torch.autograd.grad(out, [leaves[n] for n in wanted], grad_outputs=g)

            for _ in range(10):
                step()
            torch.cuda.synchronize()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                start.record()
                for _ in range(20):
                    step()
                end.record()
                torch.cuda.synchronize()
            print(f"-- {op_name} {name} S={rows}: {start.elapsed_time(end) * 1000 / 20:.1f} us per fwd+bwd (events)")
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=60))
