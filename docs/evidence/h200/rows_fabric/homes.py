"""How finely the L2 partitions share the address space: the home side of consecutive 128-byte
lines, from cold-read latencies (the kernel of sm_sides.py, its SRC read from that file).

SM 0 and an SM of the other side (the first of SMs 1, 2, ... whose cold-read pattern over 256
probe lines anticorrelates with SM 0's) each read, after a flush, 1024 consecutive 128-byte lines
(128 KB) at two places of a buffer, twice; a line is homed on SM 0's side where SM 0 reads it
faster. Prints the home string of each region and the lengths of its runs; writes argv[1] (JSON).
"""

import ast
import json
import sys
from pathlib import Path

import torch
from torch.utils.cpp_extension import load_inline

tree = ast.parse((Path(__file__).resolve().parent / "sm_sides.py").read_text())
SRC = next(n.value.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "SRC")
mod = load_inline(
    "sm_homes_probe",
    cpp_sources="void probe(torch::Tensor, torch::Tensor, int64_t, torch::Tensor, torch::Tensor);",
    cuda_sources=SRC,
    functions=["probe"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90a,code=sm_90a"],
)
props = torch.cuda.get_device_properties(torch.cuda.current_device())
buf = torch.zeros(64 << 20, dtype=torch.int32, device="cuda")
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
flag = torch.zeros(2, dtype=torch.int32, device="cuda")


def cold(sm: int, offs: torch.Tensor) -> torch.Tensor:
    for _ in range(5):
        flush.fill_(1)
        flag.zero_()
        lat = torch.zeros(offs.numel(), dtype=torch.int64, device="cuda")
        mod.probe(buf, offs, sm, flag, lat)
        torch.cuda.synchronize()
        if int(flag[0]) == 1:
            return lat.cpu().double()
    raise RuntimeError(f"no block ran on SM {sm}")


gen = torch.Generator().manual_seed(1)
scattered = ((torch.arange(256) * (256 << 10) + torch.randint(0, 1024, (256,), generator=gen) * 128) // 4).cuda()
ref = cold(0, scattered)
ref = ref - ref.median()
other = None
for sm in range(1, props.multi_processor_count):
    lat = cold(sm, scattered)
    lat = lat - lat.median()
    r = float(torch.corrcoef(torch.stack([ref, lat]))[0, 1])
    print(f"SM {sm}: correlation with SM 0 over 256 scattered lines {r:+.2f}", flush=True)
    if r < -0.3:
        other = sm
        break
if other is None:
    sys.exit("no SM of the other side found")
result = {"gpu": props.name, "torch": torch.__version__, "cuda": torch.version.cuda, "other_sm": other, "regions": {}}
for start_mb in (0, 33):
    offs = ((start_mb << 20) + torch.arange(1024) * 128) // 4
    offs = offs.to(torch.int64).cuda()
    a = torch.stack([cold(0, offs) for _ in range(2)]).min(dim=0).values
    b = torch.stack([cold(other, offs) for _ in range(2)]).min(dim=0).values
    homes = "".join("0" if x < y else "1" for x, y in zip(a.tolist(), b.tolist(), strict=True))
    runs, n = [], 1
    for p, q in zip(homes, homes[1:], strict=False):
        if p == q:
            n += 1
        else:
            runs.append(n)
            n = 1
    runs.append(n)
    gap = (a - b).abs()
    print(
        f"region at {start_mb} MB: {homes.count('0')} of 1024 lines homed on SM 0's side; runs of "
        f"128-byte lines: {sorted(set(runs))[:12]} (count {len(runs)}); |near - far| median "
        f"{gap.median():.0f} cycles, 5 % quantile {gap.quantile(0.05):.0f}",
        flush=True,
    )
    print(homes[:256], flush=True)
    result["regions"][str(start_mb)] = {"homes": homes, "sm0": a.tolist(), "other": b.tolist()}
json.dump(result, open(sys.argv[1], "w"))
