#!/usr/bin/env bash
# Rebuild the two SGLang 0.5.23 wheelhouses the engine evidence carries to the H200 (issue 22), here,
# from the package index, for the machine's Python 3.12 (its image already has torch 2.11.0+cu130,
# transformers, aiohttp, requests and the other packages KINDS.md lists, so those are left out):
#   bash docs/evidence/h200/wheelhouse23.sh      -> .whl23 (~56 MB) and .whl23b (~13 MB)
# They do not fit one 64 MiB transfer together: carry .whl23 in one call (`collect_engines.sh OUT
# install`), then .whl23b in the next call on the still-warm machine.
set -euo pipefail
get() { pip download -q --no-deps --python-version 3.12 --only-binary=:all: -d "$@"; }
mkdir -p .whl23 .whl23b
get .whl23 sglang==0.5.23 diffusers==0.42.1 apache-tvm-ffi msgspec orjson pybase64 pyzmq pydantic pydantic-core \
  annotated-types typing-inspection starlette sniffio dill cache-dit==1.5.1 \
  $(grep -v '^#' docs/evidence/h200/wheelhouse_extra.txt | grep -v -E '^(openai|jiter|distro|partial[-_]json[-_]parser|jedi|parso)')
get .whl23b compressed-tensors==0.18.0 gguf==0.19.0 loguru==0.7.3 addict==2.4.0
# sglang-kernel: SGLang pins 0.4.10 (torch 2.14.1); 0.4.6 is the last release built for torch 2.11. Its
# wheel is 377 MB, almost all FA3; the import needs only sm_90's common_ops, so the FA3, sm100,
# infllm and flashmla libraries are dropped and the RECORD rewritten to match.
tmp=$(mktemp -d)
get "$tmp" sglang-kernel==0.4.6
(cd "$tmp" && unzip -q sglang_kernel-0.4.6-*.whl -d pkg && rm -f pkg/sgl_kernel/flash_ops.abi3.so \
  pkg/sgl_kernel/flashmla_ops.abi3.so pkg/sgl_kernel/infllm_ops.*.so && rm -rf pkg/sgl_kernel/sm100 \
  && python3 - pkg <<'PY'
import base64, hashlib, pathlib, sys
root = pathlib.Path(sys.argv[1])
record = next(root.glob("*.dist-info/RECORD"))
rows = []
for f in sorted(p for p in root.rglob("*") if p.is_file() and p != record):
    digest = base64.urlsafe_b64encode(hashlib.sha256(f.read_bytes()).digest()).rstrip(b"=").decode()
    rows.append(f"{f.relative_to(root)},sha256={digest},{f.stat().st_size}")
rows.append(f"{record.relative_to(root)},,")
record.write_text("\n".join(rows) + "\n")
PY
)
(cd "$tmp/pkg" && zip -q -r "$OLDPWD/.whl23b/sglang_kernel-0.4.6-cp310-abi3-manylinux2014_x86_64.whl" .)
rm -rf "$tmp"
du -sh .whl23 .whl23b
