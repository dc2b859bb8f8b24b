#!/usr/bin/env bash
# Kernel fingerprints, dispatch switches and contention on the H200 (issue 24). Run from the
# repository root on the GPU machine, with the wheelhouse carried in .whl (README "GPU evidence"):
#   bash docs/evidence/h200/collect_kernels.sh OUT_DIR
# About 5 minutes: one case (257 rows) per op and --repeats 2 throughout.
#   fingerprints/  audit run --op all --mode plain: every candidate's CUDA kernels, forward and backward
#   sglang/, sglang_deepgemm/  adaln_projection under each SGLang mode, and sglang_diff.txt between
#                  them (deep_gemm is not in the wheelhouse: sglang_deepgemm is expected to be
#                  refused with SGLang's reason, and the sglang report's dispatch decision to
#                  name the Triton matmul; nothing here pretends otherwise)
#   switch_add/, switch_sub_neg/  the planted kernel_switch candidate (tests/plugins) on CUDA:
#                  equal bits through other aten ops; switch_diff.txt and the gate's exit status
#   contention/    rl_kernel and diffusers with every repeat under side-stream GEMM load
# times.txt has each command's exit status and wall time; summary.txt is printed at the end.
set -uo pipefail
out=${1:?output directory}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch,sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"
} > "$out/machine.txt"
common=(--device cuda --case 257 --repeats 2 --timeout 300 -q)

step() {  # step NAME ARGS...: run `audit ARGS`, its output to NAME.txt, its status and time to times.txt
  local name=$1 start=$SECONDS; shift
  python3 -m audit "$@" > "$out/$name.txt" 2>&1
  echo "$name: audit $*: exit $?, $((SECONDS - start)) s" >> "$out/times.txt"
}

step fingerprints run --op all --mode plain "${common[@]}" --out "$out/fingerprints"
step sglang run --op adaln_projection --mode plain --mode sglang "${common[@]}" --out "$out/sglang"
step sglang_deepgemm run --op adaln_projection --mode plain --mode sglang_deepgemm "${common[@]}" \
  --out "$out/sglang_deepgemm"
step sglang_diff diff "$out/sglang" "$out/sglang_deepgemm"
AUDIT_PLUGINS=tests.plugins.kernel_switch \
  step switch_add run --op gate_residual --candidate kernel_switch "${common[@]}" --out "$out/switch_add"
KERNEL_SWITCH_IMPL=sub_neg AUDIT_PLUGINS=tests.plugins.kernel_switch \
  step switch_sub_neg run --op gate_residual --candidate kernel_switch "${common[@]}" --out "$out/switch_sub_neg" \
  --baseline "$out/switch_add" --fail-on kernel-change
step switch_diff diff "$out/switch_add" "$out/switch_sub_neg"
step contention run --op all --mode plain --candidate rl_kernel --candidate diffusers --contention "${common[@]}" \
  --out "$out/contention"
step validate validate "$out"/*/*.json

python3 - "$out" > "$out/summary.txt" <<'PY'
import json, sys
from pathlib import Path

out = Path(sys.argv[1])
print((out / "times.txt").read_text().strip())
for path in sorted(out.glob("*/h3_bitwise_reuse.*.json")):
    report = json.loads(path.read_text())
    names = report.get("kernel_names") or []
    loaded = " (contention)" if report.get("contention") else ""
    print(f"\n{path.parent.name}/{report['op']}{loaded}")
    for mode, switches in report["environment"].get("dispatch", {}).items():
        print(f"  [{mode}] driver {switches['nvidia_driver']}; cuBLAS {switches['cublas'].split(' (')[0]}; "
              f"cuBLASLt {switches['cublaslt'].split(' (')[0]}; cuDNN {switches['cudnn']}; "
              f"deep_gemm {switches['deep_gemm'][:60]}; decisions {switches['decisions']}")
    for name, entry in report["results"].items():
        if "unavailable" in entry:
            print(f"  {name}: unavailable: {entry['unavailable'][:150]}")
            continue
        for case, found in (entry.get("kernels") or {}).items():
            if "unavailable" in found:
                print(f"  {name} case {case}: {found['unavailable'][:150]}")
                continue
            for phase in ("forward", "backward"):
                top = sorted(found[phase], key=lambda p: -p[1])[:3]
                print(f"  {name} case {case} {phase}: " + "; ".join(f"{n}x {names[i][:70]}" for i, n in top))
PY
cat "$out/summary.txt"
