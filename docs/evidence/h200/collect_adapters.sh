#!/usr/bin/env bash
# H200 evidence for the library adapters and their batch-invariant norms (issue 11). Run from the
# repository root on the GPU machine, one step per command, all on one warm machine (what
# /tmp/site holds is lost when the machine is given back); each step stays well under 10 minutes:
#   bash docs/evidence/h200/collect_adapters.sh OUT setup                   # CuTe wheels, import checks, audit list
#   bash docs/evidence/h200/collect_adapters.sh OUT run norm_modulate       # bitwise report, every candidate
#   bash docs/evidence/h200/collect_adapters.sh OUT prior-art norm_modulate # prior-art report, every candidate
#   (the same two for gate_residual, with sglang_fused_residual)
#   bash docs/evidence/h200/collect_adapters.sh OUT modes                   # adaln_projection under the SGLang/Megatron modes
# Before `setup`, one command carrying .whl (../shared/wheelhouse.sh) and .cute1 (../shared/cute-wheels.sh)
# must have run `mkdir -p /root/cute && cp .cute1/* /root/cute/`; `setup` carries .cute2 and runs
# within 30 s of it. Without .cute2 the CuTe-DSL candidates stay unavailable with their import error.
set -uo pipefail
out=${1:?output directory}; step=${2:?setup, run, prior-art or modes}; op=${3:-norm_modulate}
mkdir -p "$out"
export PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/python_packages:$PWD PYTHONUNBUFFERED=1 COLUMNS=200
[ -d /tmp/site/sglang ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl

record() {  # record NAME ARGS...: `audit ARGS`, tables to NAME.txt, progress to NAME.stderr.txt, wall time to times.txt
  local name=$1 start=$SECONDS; shift
  python3 -m audit "$@" > "$out/$name.txt" 2> "$out/$name.stderr.txt"
  echo "audit $*: exit $?, $((SECONDS - start)) s" >> "$out/times.txt"
}

case $step in
  setup)
    [ -f .cute2/install.sh ] && { bash .cute2/install.sh > "$out/cute_install.txt" 2>&1; echo "exit $?" >> "$out/cute_install.txt"; }
    python3 - > "$out/imports.txt" 2>&1 <<'PY'
from audit.core.packages import import_problem
for m in ("cutlass", "tvm_ffi", "cuda.bindings", "deep_gemm", "sglang.jit_kernel.diffusion.cutedsl.scale_residual_norm_scale_shift",
          "sglang.srt.batch_invariant_ops", "megatron.core.transformer.custom_layers.batch_invariant_kernels",
          "transformer_engine.pytorch", "vllm"):
    print(f"{m}: {import_problem(m) or 'imports'}")
PY
    { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
      python3 -c "import torch,sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"
      git rev-parse --short HEAD 2>/dev/null; } > "$out/machine.txt"
    record audit_list_cuda list --device cuda ;;
  run|prior-art)
    record "${step/-/_}_$op" "$step" --op "$op" --device cuda --out "$out" --timeout 500 ;;
  modes)
    record run_adaln_modes run --op adaln_projection --device cuda --out "$out" --timeout 400 \
      --mode plain --mode sglang --mode sglang_deepgemm --mode megatron_deepgemm --mode megatron_te_native ;;
  *) echo "unknown step $step" >&2; exit 2 ;;
esac
shopt -s nullglob
for f in "$out"/*.json; do python3 -m audit plot "$f" --out "${f%.json}.png" > /dev/null 2>&1; done
jsons=("$out"/*.json)
[ ${#jsons[@]} -gt 0 ] && python3 -m audit validate "${jsons[@]}" > "$out/validate.txt" 2>&1
cat "$out/times.txt" "$out"/validate.txt 2>/dev/null
