#!/usr/bin/env bash
# The rollout engines' MiniMax-H3 kernels on the H200 (issue 22): SGLang 0.5.23 from its own wheelhouse
# in .whl23 (see engines/README.md), installed into its own target beside nothing else.
#   bash docs/evidence/h200/collect_engines.sh OUT_DIR [install|bitwise|prior-art|dispatch|trajectory]
#   install     only installs the wheelhouses present (.whl23, .whl23b) into /tmp/site23
# Writes the machine, what imports, `audit list`, and then
#   bitwise     the sinusoid kernel's GPU test and the bitwise reports of norm_modulate, gate_residual,
#               the three new ops and adaln_projection with the AdaLN cache candidate
#   prior-art   their prior-art reports (norm_modulate and gate_residual --quick)
#   dispatch    the bitwise reports of the three ops the model's dispatchers serve (every candidate,
#               dispatchers included) and the AdaLN cache's bitwise and quick prior-art reports
#   prior-art-dispatch  the prior-art reports (--quick) of the dispatcher candidates
#   trajectory  `audit chain` (forward) and `audit trajectory` with the engine's kernels serving the
#               block's modulation and gate stages, diffusers' stages everywhere else
# Each command's exit status and time go to OUT_DIR/times.txt.
set -uo pipefail
out=${1:?output directory}; what=${2:-bitwise}
mkdir -p "$out"
# --upgrade: a warm machine keeps /tmp/site23, and a wheel added since must still be installed there
# .whl23b: the rest of the model module's import closure (compressed-tensors, gguf, loguru, addict and
# sglang-kernel 0.4.6 without its FA3, sm100, infllm and flashmla libraries, the last release built for
# torch 2.11), which does not fit one transfer beside .whl23: carried in a second call on a warm machine
for house in .whl23 .whl23b; do
  [ -d $house ] && python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site23 \
    $house/*.whl 2>&1 | tail -2
done
[ "$what" = install ] && exit 0
export PYTHONPATH=/tmp/site23:$PWD PYTHONUNBUFFERED=1 COLUMNS=200
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch,sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'python', sys.version.split()[0])"
  python3 -c "import importlib.metadata as m; print('sglang', m.version('sglang'), 'diffusers', m.version('diffusers'))"
} > "$out/machine.txt" 2>&1
timed() {  # NAME COMMAND...: run, append its output to OUT/NAME.txt, its exit status and time to times.txt
  local name=$1; shift; local start=$SECONDS
  "$@" >> "$out/$name.txt" 2>&1
  echo "$*: exit $?, $((SECONDS - start)) s" >> "$out/times.txt"
}
modules="sglang.kernels.ops.diffusion sglang.multimodal_gen.runtime.models.dits.minimax_h3
  sglang.multimodal_gen.runtime.models.dits.minimax_h3_adaln_cache"
if [ "$what" = dispatch ] || [ "$what" = prior-art-dispatch ]; then  # one process: each import costs 20 s there
  # shellcheck disable=SC2086
  timed imports python3 -c 'import importlib, sys
for m in sys.argv[1:]: importlib.import_module(m); print("imported", m)' $modules
else
  for module in $modules; do timed imports python3 -c "import $module; print('imported $module')"; done
  timed list python3 -m audit list --device cuda
fi
if [ "$what" = bitwise ]; then
timed cuda_sinusoid python3 -m pytest -q tests/cuda/test_rl_kernel_sinusoid.py
for op in norm_modulate gate_residual gate_residual_norm_modulate timestep_sinusoid final_adaln_out; do
  timed run_tables python3 -m audit run --op "$op" --device cuda --out "$out" --timeout 300
done
timed run_tables python3 -m audit run --op adaln_projection --mode plain --candidate sglang_adaln_cache \
  --device cuda --out "$out/h3_bitwise_reuse.adaln_projection.cache.json" --timeout 300
elif [ "$what" = dispatch ]; then
dispatchers() {  # OP CANDIDATE...: the dispatcher candidates of OP beside both references
  local op=$1; shift
  timed run_tables python3 -m audit run --op "$op" "${@/#/--candidate=}" --device cuda --timeout 300 \
    --out "$out/h3_bitwise_reuse.$op.dispatch.json"
}
dispatchers norm_modulate sglang_modulate_rmsnorm_scale_shift sglang_modulate_rmsnorm_scale_shift_fused
dispatchers gate_residual sglang_modulate_gate
dispatchers gate_residual_norm_modulate sglang_modulate_gate_rmsnorm_scale_shift \
  sglang_modulate_gate_rmsnorm_scale_shift_fused
timed run_tables python3 -m audit run --op adaln_projection --mode plain --candidate sglang_adaln_cache \
  --device cuda --out "$out/h3_bitwise_reuse.adaln_projection.cache.json" --timeout 300
timed prior_art_tables python3 -m audit prior-art --op adaln_projection --mode plain --candidate sglang_adaln_cache \
  --quick --device cuda --out "$out/h3_prior_art.adaln_projection.cache.quick.json" --timeout 200
elif [ "$what" = prior-art-dispatch ]; then
dispatchers() {  # OP CANDIDATE...: the prior-art report of OP's dispatcher candidates
  local op=$1; shift
  timed prior_art_tables python3 -m audit prior-art --op "$op" "${@/#/--candidate=}" --quick --device cuda \
    --timeout 300 --out "$out/h3_prior_art.$op.dispatch.quick.json"
}
dispatchers norm_modulate sglang_modulate_rmsnorm_scale_shift sglang_modulate_rmsnorm_scale_shift_fused
dispatchers gate_residual sglang_modulate_gate
dispatchers gate_residual_norm_modulate sglang_modulate_gate_rmsnorm_scale_shift \
  sglang_modulate_gate_rmsnorm_scale_shift_fused
elif [ "$what" = trajectory ]; then
stages() {  # NORM GATE: the candidate options putting NORM in both norm stages and GATE in both gates
  echo --candidate all=provider --candidate "norm1_modulate=$1" --candidate "norm2_modulate=$1" \
    --candidate "gate_residual_msa=$2" --candidate "gate_residual_mlp=$2"
}
declare -A chains=(
  [sglang_kernels]="$(stages sglang_indexed_scale_shift sglang_indexed_gate)"
  [sglang_fused_norm]="$(stages sglang_rmsnorm_indexed_scale_shift sglang_indexed_gate)"
  [sglang_dispatchers]="$(stages sglang_modulate_rmsnorm_scale_shift sglang_modulate_gate)"
)
for name in sglang_kernels sglang_fused_norm; do
  # shellcheck disable=SC2086
  timed chain_tables python3 -m audit chain --device cuda ${chains[$name]} --timeout 600 \
    --out "$out/h3_conditioning_chain_replay.$name.json"
done
for name in sglang_kernels sglang_fused_norm sglang_dispatchers; do
  # shellcheck disable=SC2086
  timed trajectory_tables python3 -m audit trajectory --device cuda ${chains[$name]} --timeout 600 \
    --out "$out/h3_denoising_trajectory.$name.json"
done
else
for op in gate_residual_norm_modulate timestep_sinusoid final_adaln_out; do
  timed prior_art_tables python3 -m audit prior-art --op "$op" --device cuda --out "$out" --timeout 300
done
for op in norm_modulate gate_residual; do
  timed prior_art_tables python3 -m audit prior-art --op "$op" --device cuda --out "$out/h3_prior_art.$op.quick.json" \
    --quick --timeout 200
done
timed prior_art_tables python3 -m audit prior-art --op adaln_projection --mode plain --candidate sglang_adaln_cache \
  --quick --device cuda --out "$out/h3_prior_art.adaln_projection.cache.quick.json" --timeout 200
fi
python3 -m audit validate "$out"/*.json > "$out/validate.txt" 2>&1
cat "$out/times.txt" "$out/validate.txt"
