"""Where norm_modulate's forward spends its time (call1_fwd_trace.diff): at each S (argv) the
forward without the plan and with it (the launch whose block 0 sorts the backward's plan), on
bench_row_ops' inputs, launched twice untimed, then once with RLK_FWD_TRACE set, whose stamps per
block are %globaltimer at its start, after the statistic's barrier, after its stores, and its SM.
Prints per launch: the span; the medians of a block's life and its two phases; the blocks active
at once (most, per SM at most); the ramp (until 90 % of the most are active) and the tail (from
the last moment with 90 % active to the end); the rows finished per µs between them; then the
active blocks every µs."""

import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path("benchmarks").resolve()))
from bench_row_ops import EPS, H, R, random_bf16  # noqa: E402

from audit.core.inputs import packed_index  # noqa: E402
from rl_kernel_ops import _build, cuda_rows  # noqa: E402

_build.load_extension()
ops = torch.ops.rl_kernel_ops


def report(name: str, tr: torch.Tensor) -> None:
    start, mid, end, sm = (tr[:, k].tolist() for k in range(4))
    t0 = min(start)
    span = (max(end) - t0) / 1000
    life = [(e - s) / 1000 for s, e in zip(start, end)]
    one = [(m - s) / 1000 for s, m in zip(start, mid)]
    two = [(e - m) / 1000 for m, e in zip(mid, end)]
    step = 0.25
    bins = int(span / step) + 1
    active = [0] * bins
    for s, e in zip(start, end):
        for b in range(int((s - t0) / 1000 / step), int((e - t0) / 1000 / step) + 1):
            active[min(b, bins - 1)] += 1
    most = max(active)
    full = [i for i, a in enumerate(active) if a >= 0.9 * most]
    ramp, tail_from = full[0] * step, (full[-1] + 1) * step
    done = sum(1 for e in end if ramp <= (e - t0) / 1000 < tail_from)
    per_sm: dict[int, list] = {}
    for s, e, m in zip(start, end, sm):
        per_sm.setdefault(m, []).append((s, e))
    most_sm = max(max(sum(1 for s2, e2 in v if s2 <= s < e2) for s, _ in v) for v in per_sm.values())
    print(
        f"{name}: {len(start)} blocks, span {span:.1f} us; life {statistics.median(life):.2f} "
        f"(statistic {statistics.median(one):.2f}, rest {statistics.median(two):.2f}); "
        f"block 0 {life[0]:.2f}; most active {most} ({most_sm} per SM); ramp {ramp:.2f}, "
        f"tail {span - tail_from:.2f} us; between them {done / max(tail_from - ramp, 1e-9):.0f} rows/us",
        flush=True,
    )
    print("  active every us: " + " ".join(str(active[int(i / step)]) for i in range(int(span) + 1)), flush=True)


for S in (int(s) for s in sys.argv[1].split(",")):
    torch.manual_seed(S)
    x, w = random_bf16((S, H), 2.0), (0.5 + torch.rand(H, device="cuda")).to(torch.bfloat16)
    sh, sc = random_bf16((R, H), 0.1), random_bf16((R, H), 0.1)
    idx = packed_index(3, S).cuda()
    launches = {"no plan": lambda: ops.norm_modulate_fwd(x, w, sh, sc, idx, EPS)}
    if S <= 8192:
        launches["plan"] = lambda: ops.norm_modulate_fwd_plan(x, w, sh, sc, idx, EPS, cuda_rows.TILE_ROWS)
    for name, launch in launches.items():
        launch(), launch()
        os.environ["RLK_FWD_TRACE"] = "1"
        launch()
        del os.environ["RLK_FWD_TRACE"]
        torch.cuda.synchronize()
        report(f"S={S} {name}", ops.norm_modulate_fwd_trace(x).cpu())
