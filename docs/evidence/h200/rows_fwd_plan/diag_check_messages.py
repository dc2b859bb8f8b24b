"""Call 4: C++ checks of four extension files given a bad input, one fresh process per case:
whose RuntimeError comes back, and which kills the process.

    python docs/evidence/h200/rows_fwd_plan/diag_check_messages.py CASE
"""

import sys

import torch

from rl_kernel_ops import _build

_build.load_extension()
ops = torch.ops.rl_kernel_ops
B, d = torch.bfloat16, "cuda"
case = sys.argv[1]
calls = {
    "adaln_shape": lambda: ops.adaln_proj_forward(
        torch.ones(2, 8, dtype=B, device=d), torch.ones(16, 9, dtype=B, device=d), torch.ones(16, dtype=B, device=d)
    ),
    "nm_dtype": lambda: ops.norm_modulate_fwd(
        torch.ones(4, 64, device=d),
        torch.ones(64, dtype=B, device=d),
        torch.ones(9, 64, dtype=B, device=d),
        torch.ones(9, 64, dtype=B, device=d),
        torch.zeros(4, dtype=torch.long, device=d),
        1e-5,
    ),
    "gr_dtype": lambda: ops.gate_residual_fwd(
        torch.ones(4, 64, device=d),
        torch.ones(4, 64, dtype=B, device=d),
        torch.ones(9, 64, dtype=B, device=d),
        torch.zeros(4, dtype=torch.long, device=d),
    ),
    "sort257": lambda: ops.row_sort_plan(torch.zeros(64, dtype=torch.long, device=d), 257, 64),
    "fold_dtype": lambda: ops.row_segment_fold(torch.ones(1, 2, 8, dtype=B, device=d), None),
}
try:
    calls[case]()
    print(case, "returned")
except RuntimeError as e:
    print(case, "raised:", str(e).splitlines()[0][:120])
