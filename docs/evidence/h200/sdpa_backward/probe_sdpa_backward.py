"""Which setting lets the provider's own backward repeat bit for bit (issue 23): the chain's provider
(diffusers' one-block MiniMax-H3 model, ``audit.core.chain``) run forward and backward three times per
SDPA backend, at the full block sizes, in one process whose deterministic setting is fixed at start.

    python3 docs/evidence/h200/sdpa_backward/probe_sdpa_backward.py OUT.json [--deterministic] [--length N ...]

``--deterministic`` turns torch's deterministic algorithms on; run it with
``CUBLAS_WORKSPACE_CONFIG=:4096:8`` in the environment, as ``audit chain --deterministic`` launches its
worker (the script refuses otherwise). Without it, run it with that variable unset, as the worker runs.

Per backend and length it records the backend torch ran (``audit.core.backends.observe``), whether
runs 2 and 3 gave the bits of run 1 for every gradient (chain values and parameters), the tensors
and elements that differed, and the median wall time of runs 2 and 3 (forward + backward, synchronised).
A backend that raises is recorded with its reason. The table is printed; the JSON holds everything.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

from audit.core import backends
from audit.core.chain import STAGES, BlockConfig, _synchronize, build_model, draw_inputs, make_side, replay
from audit.core.compare import count_differ
from audit.core.packages import error_text

RUNS = 3


def probe(model, config: BlockConfig, length: int, name: str, device: torch.device) -> dict:
    seen = backends.observe(
        name, heads=config.heads, head_dim=config.head_dim, length=length, device=device, backward=True
    )
    row = {"attention": name, "length": length, **seen}
    if "unavailable" in seen:
        return row
    inputs = draw_inputs(config, length)
    start = {"timestep": inputs.timestep.to(device), "h0": inputs.hidden.to(device)}
    grad_out = inputs.grad_out.to(device)
    providers = [st.provider for st in STAGES]
    runs, times = [], []
    try:
        with backends.pinned(name):
            for _ in range(RUNS):
                _synchronize(device)
                began = time.perf_counter()
                runs.append(replay(make_side(model, inputs, device, True), providers, start, grad_out).grads)
                _synchronize(device)
                times.append(time.perf_counter() - began)
    except RuntimeError as exc:
        return row | {"error": error_text(exc)}
    differ = {}
    for key, first in runs[0].items():
        worst = max(count_differ(first, again[key]) for again in runs[1:])
        if worst:
            differ[key] = {"differ": worst, "numel": first.numel()}
    return row | {
        "repeatable": not differ,
        "tensors": len(runs[0]),
        "tensors_differ": len(differ),
        "differ": differ,
        "fwd_bwd_ms": 1e3 * statistics.median(times[1:]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--deterministic", action="store_true")
    ap.add_argument("--length", type=int, action="append")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--hidden", type=int, default=BlockConfig.hidden, help="a reduced block for a smoke test")
    ap.add_argument("--heads", type=int, default=BlockConfig.heads)
    ap.add_argument("--ffn", type=int, default=BlockConfig.ffn)
    args = ap.parse_args()
    workspace = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    if args.deterministic != (workspace == ":4096:8"):
        print("--deterministic goes with CUBLAS_WORKSPACE_CONFIG=:4096:8, and only with it", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if args.deterministic:
        torch.use_deterministic_algorithms(True)
    device = torch.device(args.device)
    config = BlockConfig(hidden=args.hidden, heads=args.heads, ffn=args.ffn)
    model = build_model(config, device)
    rows = [
        probe(model, config, length, name, device)
        for length in args.length or [513, 2053]
        for name in backends.ATTENTION
    ]
    found = {
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "deterministic": args.deterministic,
        "CUBLAS_WORKSPACE_CONFIG": workspace,
        "block": config.__dict__,
        "runs": RUNS,
        "rows": rows,
    }
    with open(args.out, "w") as f:
        json.dump(found, f, indent=1)
    det = "deterministic" if args.deterministic else "default algorithms"
    for r in rows:
        if "unavailable" in r or "error" in r:
            state = r.get("unavailable") or f"raised: {r['error']}"
        else:
            worst = sorted(r["differ"].items(), key=lambda kv: -kv[1]["differ"])[:3]
            state = (
                f"{'repeats' if r['repeatable'] else 'DIFFERS'} ({r['tensors_differ']}/{r['tensors']} tensors"
                + "".join(f"; {k} {v['differ']}/{v['numel']}" for k, v in worst)
                + f"), {r['fwd_bwd_ms']:.1f} ms"
            )
        print(f"{det:18} L={r['length']:5} {r['attention']:9} ran={r.get('ran', '-'):20} {state[:300]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
