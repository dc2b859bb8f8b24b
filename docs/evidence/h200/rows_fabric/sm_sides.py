"""Which L2 partition each SM is near, and where each probed line lives: a latency probe.

For every SM (by %smid), after a 256 MB write has pushed the probe buffer out of L2, one thread on
that SM loads `LINES` lines of the buffer one after another (ld.global.cg, each load's address
depending on the previous value), timing each with clock64: a cold read from DRAM, through the
SM's near L2 partition or across the fabric to the far one. SMs whose latency patterns over the
lines agree share a side; a line's home is the side that reads it faster. Then, with the sides
known: is a line read from the far side kept in the reader's near partition? After a flush, SM a
reads every line cold, then SMs on a's side and on the other side read them again.
Writes argv[1] (JSON): the latency matrix, the sides, the homes and the second test's latencies;
argv[2], if given: the sides as one digit per %smid (RLK_SIDES of rows_fabric's attempt).
"""

import json
import sys

import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
#include <torch/extension.h>

__global__ void probe_kernel(const unsigned* __restrict__ buf, const int64_t* __restrict__ offs, int n,
                             int target, int* flag, int64_t* lat) {
  __shared__ long long off_s[1024];
  __shared__ long long lat_s[1024];
  unsigned smid;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  if (smid != static_cast<unsigned>(target) || threadIdx.x != 0) return;
  if (atomicCAS(flag, 0, 1) != 0) return;
  for (int k = 0; k < n; ++k) off_s[k] = offs[k];
  unsigned sum = 0, dep = 0;
#pragma unroll 1
  for (int k = 0; k < n; ++k) {
    const unsigned* p = buf + off_s[k] + dep;
    unsigned v;
    const long long t0 = clock64();
    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    asm volatile("add.u32 %0, %0, %1;" : "+r"(sum) : "r"(v));
    const long long t1 = clock64();
    lat_s[k] = t1 - t0;
    asm volatile("and.b32 %0, %1, 0;" : "=r"(dep) : "r"(sum));
  }
  for (int k = 0; k < n; ++k) lat[k] = lat_s[k];
  flag[1] = static_cast<int>(sum);
}

void probe(torch::Tensor buf, torch::Tensor offs, int64_t target, torch::Tensor flag, torch::Tensor lat) {
  probe_kernel<<<2048, 32>>>(reinterpret_cast<const unsigned*>(buf.data_ptr<int>()), offs.data_ptr<int64_t>(),
                             static_cast<int>(offs.numel()), static_cast<int>(target), flag.data_ptr<int>(),
                             lat.data_ptr<int64_t>());
}
"""

LINES = 512
mod = load_inline(
    "sm_sides_probe",
    cpp_sources="void probe(torch::Tensor, torch::Tensor, int64_t, torch::Tensor, torch::Tensor);",
    cuda_sources=SRC,
    functions=["probe"],
    extra_cuda_cflags=["-O3", "-gencode=arch=compute_90a,code=sm_90a"],
)
dev = torch.cuda.current_device()
props = torch.cuda.get_device_properties(dev)
sms = props.multi_processor_count
buf = torch.zeros(64 << 20, dtype=torch.int32, device="cuda")  # 256 MB
flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
gen = torch.Generator().manual_seed(0)
# Lines 128 KB apart plus a random 128-byte-aligned shift inside 64 KB: many pages and channels.
offs = (torch.arange(LINES) * (128 << 10) + torch.randint(0, 512, (LINES,), generator=gen) * 128) // 4
offs = offs.to(torch.int64).cuda()
flag = torch.zeros(2, dtype=torch.int32, device="cuda")


def read_from(sm: int, flushed: bool) -> list[int] | None:
    if flushed:
        flush.fill_(1)
    flag.zero_()
    lat = torch.zeros(LINES, dtype=torch.int64, device="cuda")
    mod.probe(buf, offs, sm, flag, lat)
    torch.cuda.synchronize()
    return lat.tolist() if int(flag[0]) == 1 else None


cold = {}
for sm in range(sms):
    for _ in range(5):
        got = read_from(sm, True)
        if got is not None:
            cold[sm] = got
            break
print(f"{props.name}: {len(cold)} of {sms} SMs probed, {LINES} lines", flush=True)
mat = torch.tensor([cold[s] for s in sorted(cold)], dtype=torch.float64)  # SMs x lines
# Centre each line; the SMs' first principal component over the lines splits them in two sides.
cen = mat - mat.median(dim=0).values
u, sv, _ = torch.linalg.svd(cen - cen.mean(dim=0), full_matrices=False)
agree = u[:, 0] * (1 if u[0, 0] >= 0 else -1)
side = (agree < 0).to(torch.int64)  # side 0: the first SM's
print(f"singular values {[round(x) for x in sv[:4].tolist()]}", flush=True)
s_list = sorted(cold)
side_of = {s: int(side[i]) for i, s in enumerate(s_list)}
mean0, mean1 = mat[side == 0].mean(dim=0), mat[side == 1].mean(dim=0)
home = (mean1 < mean0).to(torch.int64)  # the side that reads the line faster
near = torch.where(home == 0, mean0, mean1)
far = torch.where(home == 0, mean1, mean0)
print(f"sides: {int((side == 0).sum())} SMs with SM {s_list[0]}, {int((side == 1).sum())} on the other", flush=True)
print(
    f"first component, SM {s_list[0]}'s pattern: {sorted(round(float(a), 2) for a in agree)[:5]} ... "
    f"{sorted(round(float(a), 2) for a in agree)[-5:]}",
    flush=True,
)
print(
    f"lines homed on side 0: {int((home == 0).sum())} of {LINES}; cold read near {near.median():.0f}, "
    f"far {far.median():.0f} cycles (medians over lines)",
    flush=True,
)
q = torch.tensor([0.05, 0.25, 0.5, 0.75, 0.95], dtype=torch.float64)
print(f"cold latency quantiles (5/25/50/75/95 %): {mat.flatten().quantile(q).round().tolist()} cycles", flush=True)
sides = "".join(str(side_of.get(s, 0)) for s in range(sms))
print("side by smid:", sides, flush=True)
if len(sys.argv) > 2:
    open(sys.argv[2], "w").write(sides)

# Second test: SM a reads cold, then a partner on a's side and one on the other side read again.
a = s_list[0]
same = next(s for s in s_list[1:] if side_of[s] == side_of[a])
other = [s for s in s_list if side_of[s] != side_of[a]][:2]
if len(other) < 2:
    sys.exit("one side only: no second test")
seq = [(a, True), (other[0], False), (same, False), (other[1], False)]
second = {}
for sm, flushed in seq:
    second[f"{sm}{'_cold' if flushed else ''}"] = read_from(sm, flushed)
hv = home.tolist()
for name, lat in second.items():
    if lat is None:
        print(f"  SM {name}: not reached", flush=True)
        continue
    t = torch.tensor(lat, dtype=torch.float64)
    h = torch.tensor(hv)
    sm = int(name.split("_")[0])
    s = side_of[sm]
    print(
        f"  SM {name} (side {s}): lines homed near {t[h == s].median():.0f}, homed far {t[h != s].median():.0f} cycles",
        flush=True,
    )
json.dump(
    {
        "gpu": props.name,
        "uuid": str(getattr(props, "uuid", "")),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "lines": LINES,
        "offsets_words": offs.tolist(),
        "cold_cycles": {str(s): cold[s] for s in s_list},
        "side_of_smid": {str(s): side_of[s] for s in s_list},
        "line_home": hv,
        "second_test": second,
    },
    open(sys.argv[1], "w"),
)
