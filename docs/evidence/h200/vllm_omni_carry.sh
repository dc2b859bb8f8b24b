#!/usr/bin/env bash
# Build, here, the three carries that bring vLLM-Omni 0.30.0 with the real vLLM 0.30.0 to the H200
# (engines/vllm_omni_route.md says why three): each fits one 64 MiB transfer beside the checkout.
#   bash docs/evidence/h200/vllm_omni_carry.sh
#   .vo_a/  vllm_py.tgz (vllm and vllm-omni without vLLM's compiled libraries, its CUDA headers and
#           its Rust binary vllm-rs; 17 MB) and the cp312 wheels the H200's image lacks
#   .vo_b/  vllm/_C_stable_libtorch.abi3.so, gzipped (vllm/platforms/cuda.py imports it on CUDA)
#   .vo_c/  vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so, gzipped (vllm_flash_attn refuses to import
#           without an FA extension; FA3 is Hopper's), and the diffusers wheel the references import
# Then on one warm machine: collect_vllm_omni.sh OUT a, then b, then c (c runs the audits).
set -euo pipefail
get() { pip download -q --no-deps --python-version 3.12 --only-binary=:all: -d "$@"; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
get "$tmp" vllm==0.30.0 vllm-omni==0.30.0
mkdir -p .vo_a .vo_b .vo_c
get .vo_a aenum==3.1.16 annotated-types==0.8.0 apache-tvm-ffi==0.1.11 cachetools==8.0.2 cbor2==6.3.0 \
  fastapi==0.136.3 httpx2==2.16.2 llguidance==1.7.6 loguru==0.7.3 msgspec==0.23.0 omegaconf==2.4.0 \
  openai==3.57.0 openai-harmony==0.0.8 partial-json-parser==0.2.1.1.post7 prettytable==3.18.0 \
  pybase64==1.5.1 pydantic==2.14.4 pydantic-core==2.50.5 pyzmq==27.3.0 sniffio==1.3.1 starlette==1.10.0 \
  typing-inspection==0.4.5 xgrammar==0.2.9
(cd "$tmp" && unzip -q vllm-0.30.0-*.whl -x '*.so' && unzip -q vllm-0.30.0-*.whl \
  'vllm/_C_stable_libtorch.abi3.so' 'vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so' \
  && unzip -q vllm_omni-0.30.0-py3-none-any.whl 'vllm_omni/*' 'vllm_omni-0.30.0.dist-info/*' \
  && tar czf vllm_py.tgz --exclude='*.so' --exclude='vllm/third_party/*/include' --exclude='vllm/vllm-rs' vllm vllm-0.30.0.dist-info vllm_omni vllm_omni-0.30.0.dist-info)
mv "$tmp/vllm_py.tgz" .vo_a/
gzip -c "$tmp/vllm/_C_stable_libtorch.abi3.so" > .vo_b/_C_stable_libtorch.abi3.so.gz
gzip -c "$tmp/vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so" > .vo_c/_vllm_fa3_C.abi3.so.gz
get .vo_c diffusers==0.42.1
du -sh .vo_a .vo_b .vo_c
