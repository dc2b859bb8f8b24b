"""Call 2's probes read again (run here, on the CPU): the kernel of that run timed only its odd
lines (its loop was unrolled by two, and the even lines' clock reads came before their loads
returned: 4 or 13 cycles), so this keeps the odd lines of both runs' cold matrices, splits the SMs
by their first principal component, and reads the second test the same way.
Run: python docs/evidence/h200/rows_fabric/call2_odd_lines.py"""

import json
from pathlib import Path

import torch

here = Path(__file__).resolve().parent
runs = [json.loads((here / f"call2_sm_sides.run{r}.json").read_text()) for r in (1, 2)]
sms = len(runs[0]["cold_cycles"])
mats = [torch.tensor([d["cold_cycles"][str(s)][1::2] for s in range(sms)], dtype=torch.float64) for d in runs]
even = torch.tensor([d["cold_cycles"][str(s)][0::2] for d in runs for s in range(sms)], dtype=torch.float64)
print(f"even lines: {int((even <= 13).sum())} of {even.numel()} timings at 13 cycles or less")
firsts = []
for r, m in enumerate(mats, 1):
    cen = m - m.median(dim=0).values
    u, sv, _ = torch.linalg.svd(cen - cen.mean(dim=0), full_matrices=False)
    firsts.append(u[:, 0] * (1 if u[0, 0] >= 0 else -1))
    print(f"run {r}: singular values {[round(x) for x in sv[:4].tolist()]}")
print(f"first components of the two runs: correlation {torch.corrcoef(torch.stack(firsts))[0, 1]:.3f}")
m = (mats[0] + mats[1]) / 2
side = firsts[0] < 0  # side 1: the SMs whose component has the other sign than SM 0's
print(f"sides: {int((~side).sum())} SMs with SM 0, {int(side.sum())} on the other")
print("side by smid:", "".join(str(int(x)) for x in side.tolist()))
diff = m[side].mean(dim=0) - m[~side].mean(dim=0)
home1 = diff < 0
near = torch.where(home1, m[side].mean(dim=0), m[~side].mean(dim=0))
far = torch.where(home1, m[~side].mean(dim=0), m[side].mean(dim=0))
print(
    f"odd lines homed on side 1: {int(home1.sum())} of {len(diff)}; cold read near {near.median():.0f}, "
    f"far {far.median():.0f} cycles (medians over lines of the side means)"
)
for name, lat in runs[0]["second_test"].items():
    sm = int(name.split("_")[0])
    t = torch.tensor(lat[1::2], dtype=torch.float64)
    s = int(side[sm])
    print(
        f"  second test, SM {name} (side {s}): lines homed on its side {t[home1.long() == s].median():.0f}, "
        f"on the other {t[home1.long() != s].median():.0f} cycles"
    )
