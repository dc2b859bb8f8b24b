"""norm_modulate's forward with and without the backward's plan, side by side at several S (run
from the repository root): norm_modulate_fwd alone, norm_modulate_fwd_plan (one more block sorts
the plan in the same launch), and norm_modulate_fwd followed by row_sort_plan (the plan as the
backward sorts it otherwise). The sorted-in-the-forward plan is checked against row_sort_plan's and
its out and rstd bitwise against norm_modulate_fwd's. Times as in ../rows_overlap/probe_overlap.py.

    python docs/evidence/h200/rows_fwd_plan/probe_forward_plan.py 1024,4097,8192
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "rows_graphed"))
from probe_fused_layouts import EPS, H, R, random_bf16, same_bits, us  # noqa: E402

from audit.core.inputs import packed_index  # noqa: E402
from rl_kernel_ops import _build, cuda_rows  # noqa: E402


def main() -> None:
    _build.load_extension()
    ops = torch.ops.rl_kernel_ops
    for S in (int(s) for s in sys.argv[1].split(",")):
        torch.manual_seed(S)
        x, w = random_bf16((S, H), 2.0), (0.5 + torch.rand(H, device="cuda")).to(torch.bfloat16)
        sh, sc = random_bf16((R, H), 0.1), random_bf16((R, H), 0.1)
        idx = packed_index(3, S).cuda()
        args = (x, w, sh, sc, idx, EPS)
        out, rstd, *plan = ops.norm_modulate_fwd_plan(*args, cuda_rows.TILE_ROWS)
        same = all(same_bits(a, b) for a, b in zip((out, rstd), ops.norm_modulate_fwd(*args), strict=True))
        same = same and all(
            torch.equal(a, b) for a, b in zip(plan, ops.row_sort_plan(idx, R, cuda_rows.TILE_ROWS), strict=True)
        )
        alone = us(lambda: ops.norm_modulate_fwd(*args))  # noqa: B023
        with_plan = us(lambda: ops.norm_modulate_fwd_plan(*args, cuda_rows.TILE_ROWS))  # noqa: B023
        then_sort = us(lambda: (ops.norm_modulate_fwd(*args), ops.row_sort_plan(idx, R, cuda_rows.TILE_ROWS)))  # noqa: B023
        print(
            f"S={S:5d}  forward {alone:6.1f} us | with the plan in its launch {with_plan:6.1f} us | "
            f"then row_sort_plan {then_sort:6.1f} us | {'same bits and plan' if same else 'DIFFERENT'}",
            flush=True,
        )


if __name__ == "__main__":
    main()
