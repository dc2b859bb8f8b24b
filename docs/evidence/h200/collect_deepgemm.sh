#!/usr/bin/env bash
# The DeepGEMM switch under SGLang's own mode (issue 24): adaln_projection under `sglang_deepgemm`
# (SGLANG_BATCH_INVARIANT_OPS_ENABLE_MM_DEEPGEMM=1, SGLang's default) twice, first where deep_gemm
# does not import (SGLang falls back to its Triton matmul), then with DeepGEMM on the path: the
# `deep_gemm` package of sglang-kernel 0.4.2's wheel (built for torch 2.11.0 and CUDA 13; the
# sgl-deep-gemm wheels need a newer torch), carried as .dg/deep_gemm_sglang_kernel_0.4.2.tgz since the
# whole wheel is 326 MB; `audit diff` between them, and the second run gated with
# --fail-on kernel-change against the first. Run from the repository root with .whl and .dg carried:
#   bash docs/evidence/h200/collect_deepgemm.sh OUT_DIR
set -uo pipefail
out=${1:?output directory}
mkdir -p "$out"
[ -d /tmp/site ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl 2>&1 | tail -2
mkdir -p /tmp/dg && tar xzf .dg/deep_gemm_sglang_kernel_0.4.2.tgz -C /tmp/dg && cp /tmp/dg/deep_gemm_SOURCE.txt "$out/"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=200
# DeepGEMM compiles its kernels at run time with nvcc or NVRTC, found through CUDA_HOME
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$nvcc")")}
step() {  # NAME ARGS...: `audit ARGS`, its output to NAME.txt, its exit status and time to times.txt
  local name=$1 start=$SECONDS; shift
  python3 -m audit "$@" > "$out/$name.txt" 2>&1
  echo "$name: PYTHONPATH=$PYTHONPATH audit $*: exit $?, $((SECONDS - start)) s" >> "$out/times.txt"
}
common=(run --op adaln_projection --mode plain --mode sglang_deepgemm --candidate diffusers --device cuda --repeats 2 --timeout 300)
step without "${common[@]}" --out "$out/without"
PYTHONPATH=/tmp/dg:$PYTHONPATH python3 -c "import deep_gemm; print('deep_gemm imports from', deep_gemm.__file__, 'SMs', deep_gemm.get_num_sms())" \
  > "$out/deep_gemm_import.txt" 2>&1
PYTHONPATH=/tmp/dg:$PYTHONPATH step with "${common[@]}" --out "$out/with" --baseline "$out/without" --fail-on kernel-change
step diff diff "$out/without" "$out/with"
cat "$out/times.txt" "$out/deep_gemm_import.txt"; tail -n 25 "$out/diff.txt"
