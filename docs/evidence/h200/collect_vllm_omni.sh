#!/usr/bin/env bash
# vLLM-Omni 0.30.0's MiniMax-H3 kernels on the H200 (issue 22), with the real vLLM 0.30.0 brought in
# three calls on one warm machine (vllm_omni_carry.sh builds the carries; not yet run there):
#   bash docs/evidence/h200/collect_vllm_omni.sh OUT a   carry .vo_a: the Python files and the wheels
#   bash docs/evidence/h200/collect_vllm_omni.sh OUT b   carry .vo_b: vLLM's _C_stable_libtorch
#   bash docs/evidence/h200/collect_vllm_omni.sh OUT c [bitwise|prior-art]
#                                                        carry .vo_c: FA3 and diffusers; then the imports and
#                                                        the bitwise reports (default) or the prior-art reports
#                                                        and diffusers under vLLM's batch-invariant mode
# Everything goes to /tmp/sitevo, beside nothing else; each step's exit status and time go to
# OUT/times.txt.
set -uo pipefail
out=${1:?output directory}; step=${2:?a, b or c}; what=${3:-bitwise}
mkdir -p "$out" /tmp/sitevo/vllm/vllm_flash_attn
case $step in
a) python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/sitevo .vo_a/*.whl 2>&1 | tail -2
   tar xzf .vo_a/vllm_py.tgz -C /tmp/sitevo; exit 0 ;;
b) gunzip -c .vo_b/_C_stable_libtorch.abi3.so.gz > /tmp/sitevo/vllm/_C_stable_libtorch.abi3.so; exit 0 ;;
c) gunzip -c .vo_c/_vllm_fa3_C.abi3.so.gz > /tmp/sitevo/vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so
   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/sitevo .vo_c/*.whl 2>&1 | tail -2 ;;
esac
export PYTHONPATH=/tmp/sitevo:$PWD PYTHONUNBUFFERED=1 COLUMNS=200 VLLM_CONFIGURE_LOGGING=0
timed() {  # NAME COMMAND...: run, append its output to OUT/NAME.txt, its exit status and time to times.txt
  local name=$1; shift; local start=$SECONDS
  "$@" >> "$out/$name.txt" 2>&1
  echo "$*: exit $?, $((SECONDS - start)) s" >> "$out/times.txt"
}
timed imports python3 -c 'import vllm, vllm_omni, importlib.metadata as m
import vllm_omni.diffusion.layers.indexed_modulation as k
print("vllm", m.version("vllm"), "vllm-omni", m.version("vllm-omni"), "kernels from", k.__file__)'
if [ "$what" = bitwise ]; then
engine() {  # OP CANDIDATE...: those candidates of OP beside both references
  local op=$1; shift
  timed run_tables python3 -m audit run --op "$op" "${@/#/--candidate=}" --device cuda --timeout 300 \
    --out "$out/h3_bitwise_reuse.$op.vllm_omni.json"
}
engine norm_modulate vllm_omni_indexed_scale_shift vllm_omni_rms_norm_indexed_scale_shift vllm_bi_rmsnorm
engine gate_residual vllm_omni_indexed_gate
engine gate_residual_norm_modulate vllm_omni_indexed_gate_rms_norm_scale_shift
else
engine() {  # OP QUICK CANDIDATE...: the prior-art report of those candidates (--quick unless QUICK is full)
  local op=$1 quick=$2; shift 2
  local name="$out/h3_prior_art.$op.vllm_omni.json" flag=()
  [ "$quick" = quick ] && name="$out/h3_prior_art.$op.vllm_omni.quick.json" flag=(--quick)
  timed prior_art_tables python3 -m audit prior-art --op "$op" "${@/#/--candidate=}" "${flag[@]}" --device cuda \
    --timeout 300 --out "$name"
}
engine norm_modulate quick vllm_omni_indexed_scale_shift vllm_omni_rms_norm_indexed_scale_shift vllm_bi_rmsnorm
engine gate_residual quick vllm_omni_indexed_gate
engine gate_residual_norm_modulate full vllm_omni_indexed_gate_rms_norm_scale_shift
for op in norm_modulate adaln_projection; do  # diffusers under vLLM's own batch-invariant mode
  timed mode_tables python3 -m audit run --op "$op" --mode plain --mode vllm --candidate diffusers --device cuda \
    --timeout 300 --out "$out/h3_bitwise_reuse.$op.vllm_mode.json"
done
fi
python3 -m audit validate "$out"/*.json > "$out/validate.txt" 2>&1
cat "$out/times.txt" "$out/validate.txt"
