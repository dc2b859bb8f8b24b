"""The column-split backward (variant 10 + splits, 3: splits chosen) against the overlapped (2) and
fused (1) kernels, bits against the split pair. argv: S, then name=variant pairs. --ncu S v: one call."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path("docs/evidence/h200/rows_overlap").resolve()))
from probe_overlap import probe  # noqa: E402

import rl_kernel_ops  # noqa: E402

if sys.argv[1] == "--ncu":
    import torch
    from probe_fused_layouts import EPS, H, R, random_bf16  # noqa: E402
    from audit.core.inputs import packed_index
    from rl_kernel_ops import _build, cuda_rows

    _build.load_extension()
    ops = torch.ops.rl_kernel_ops
    S, variant = int(sys.argv[2]), int(sys.argv[3])
    torch.manual_seed(S)
    x, w = random_bf16((S, H), 2.0), (0.5 + torch.rand(H, device="cuda")).to(torch.bfloat16)
    sc, g = random_bf16((R, H), 0.1), random_bf16((S, H))
    idx = packed_index(3, S).cuda()
    _, rstd = ops.norm_modulate_fwd(x, w, sc, sc, idx, EPS)
    plan = (*cuda_rows._plan(ops, idx, R), cuda_rows.TILE_ROWS)
    for _ in range(2):
        ops.norm_modulate_bwd(g, x, rstd, w, sc, idx, *plan, variant)
    torch.cuda.synchronize()
    sys.exit(0)
print("rl_kernel_ops from", rl_kernel_ops.__file__, flush=True)
probe(sys.argv[1], tuple((n, int(v)) for n, v in (s.split("=") for s in sys.argv[2].split(","))))
