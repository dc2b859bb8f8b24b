"""Call 3: norm_modulate_fwd_plan and row_sort_plan given what their checks refuse, one fresh
process per case: whether the RuntimeError comes back or the process dies.

    python docs/evidence/h200/rows_fwd_plan/diag_refusals.py CASE
"""

import sys

import torch

from rl_kernel_ops import _build

_build.load_extension()
ops = torch.ops.rl_kernel_ops
case = sys.argv[1]
B = torch.bfloat16
rows, tr = {"rows0": (0, 9), "rows8193": (8193, 9), "tables257": (64, 257), "ok": (64, 9), "sort257": (64, 257)}[case]
x = torch.ones(rows, 64, dtype=B, device="cuda")
w = torch.ones(64, dtype=B, device="cuda")
t = torch.zeros(tr, 64, dtype=B, device="cuda")
idx = torch.zeros(rows, dtype=torch.long, device="cuda")
try:
    if case == "sort257":
        ops.row_sort_plan(idx, tr, 64)
    else:
        ops.norm_modulate_fwd_plan(x, w, t, t, idx, 1e-5, 64)
    print(case, "returned")
except RuntimeError as e:
    print(case, "RuntimeError:", str(e).splitlines()[0])
