"""``audit selftest``, worker side: the comparator and the checks prove that they can fail.

``python -m audit.worker.selftest RESULT.json``, started by ``audit.cli.selftest`` through the
launcher. On the CPU it runs a small real audit (diffusers and rl_kernel on gate_residual, bf16,
and timestep_mlp, fp32), then checks these properties and writes each as
``{"property", "holds", "detail"}``:
- every output and gradient compared with itself is equal;
- one flipped bit (the sign bit, the lowest exponent bit, the last mantissa bit) at a seeded random
  index of each output and gradient is reported as exactly one differing element, at that index,
  with the ULP distance computed here independently of the comparator (or as non-finite where
  the flip makes an Inf or NaN);
- -0.0 against +0.0, and two NaNs with different payloads, differ (one ULP; non-finite);
- planted candidates are caught: one 3 ULPs off every element (``ulp_max`` 3), one whose rows
  depend on the rest of the batch (the prior-art all-rows check), one that is not repeatable
  (the bitwise repeatability check).
Everything here is deterministic; the planted non-repeatable candidate moves another element on
every call.
"""

from __future__ import annotations

import itertools
import json
import random
import sys
from pathlib import Path

import torch

from audit.core.candidates import Candidate, get_candidate, load_adapters
from audit.core.compare import compare
from audit.core.inputs import draw_grad_out, draw_inputs
from audit.core.ops import OpSpec, get_op
from audit.core.prior_art_sizes import Sizes
from audit.worker.bitwise import compare_results, evaluate_repeated, tensors_of
from audit.worker.prior_art import Checker
from modes import get_mode

SEED = 20261201  # the flips' indices: the same every run
CASES = {"gate_residual": 4, "timestep_mlp": 2}
_INT = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32, torch.float64: torch.int64}
_MANTISSA = {torch.bfloat16: 7, torch.float16: 10, torch.float32: 23, torch.float64: 52}


def _key(bits: int, width: int) -> int:
    """The ordered integer of a float's bit pattern (plain Python, apart from the comparator):
    +x is its magnitude, -x is -magnitude - 1."""
    bits &= (1 << width) - 1
    magnitude = bits & ((1 << (width - 1)) - 1)
    return -magnitude - 1 if bits >> (width - 1) else magnitude


def _flip(t: torch.Tensor, index: int, bit: int) -> torch.Tensor:
    """A copy of ``t`` with bit ``bit`` of element ``index`` (row-major) flipped."""
    width = 8 * t.element_size()
    flipped = t.detach().clone().reshape(-1)
    as_int = flipped.view(_INT[t.dtype])
    value = (int(as_int[index]) & ((1 << width) - 1)) ^ (1 << bit)
    as_int[index] = value - (1 << width) if value >> (width - 1) else value  # back to a signed integer
    return flipped.reshape(t.shape)


def _expected(t: torch.Tensor, flipped: torch.Tensor, index: int) -> dict:
    """What the comparator must say about one flipped element, computed here."""
    width = 8 * t.element_size()
    a = int(flipped.reshape(-1).view(_INT[t.dtype])[index])
    b = int(t.reshape(-1).view(_INT[t.dtype])[index])
    finite = bool(torch.isfinite(flipped.reshape(-1)[index])) and bool(torch.isfinite(t.reshape(-1)[index]))
    first, rest = [], index
    for size in reversed(t.shape):
        rest, i = divmod(rest, size)
        first.append(i)
    return {
        "differ": 1,
        "first_differ": first[::-1],
        "ulp_max": abs(_key(a, width) - _key(b, width)) if finite else None,
    }


def bit_flips(name: str, tensors: dict[str, torch.Tensor], rng: random.Random) -> list[dict]:
    found = []
    for key, t in tensors.items():
        same = compare(t, t)
        found.append(_property(f"{name} {key} equals itself", same["equal"] and same["differ"] == 0, same))
        width = 8 * t.element_size()
        for what, bit in (("sign", width - 1), ("exponent", _MANTISSA[t.dtype]), ("last mantissa", 0)):
            index = rng.randrange(t.numel())
            flipped = _flip(t, index, bit)
            got, want = compare(flipped, t), _expected(t, flipped, index)
            holds = all(got.get(k) == v for k, v in want.items())
            found.append(_property(f"{name} {key}: {what} bit flipped at {index}", holds, {"got": got, "want": want}))
    return found


def _property(name: str, holds: bool, detail: object) -> dict:
    return {"property": name, "holds": bool(holds), "detail": json.dumps(detail, default=str)[:500]}


def special_values() -> list[dict]:
    zeros = compare(torch.tensor([-0.0]), torch.tensor([0.0]))
    nan_a = torch.tensor([0x7FC00001], dtype=torch.int32).view(torch.float32)
    nan_b = torch.tensor([0x7FC00002], dtype=torch.int32).view(torch.float32)
    nans = compare(nan_a, nan_b)
    same_nan = compare(nan_a, nan_a.clone())
    return [
        _property("-0.0 vs +0.0 differs by one ULP", zeros["differ"] == 1 and zeros["ulp_max"] == 1, zeros),
        _property(
            "two NaN payloads differ (non-finite)",
            nans["differ"] == 1 and nans.get("ulp_hist") == {"non-finite": 1},
            nans,
        ),
        _property("one NaN payload equals itself", same_nan["equal"], same_nan),
    ]


def _three_ulps_off(base: Candidate) -> Candidate:
    def forward(t: dict[str, torch.Tensor]) -> torch.Tensor:
        out = base.forward(t)
        moved = (out.detach().view(_INT[out.dtype]) + 3).view(out.dtype)  # the magnitude 3 up, any sign
        return moved + (out - out.detach())  # exactly ``moved``, with ``out``'s gradients

    return Candidate("planted_3_ulps_off", base.op, forward, lambda m, d: "planted: 3 ULPs off")


def _row_dependent(base: Candidate) -> Candidate:
    def forward(t: dict[str, torch.Tensor]) -> torch.Tensor:
        out = base.forward(t)
        return out + 2.0**-6 * t["y"].mean(dim=0, keepdim=True)  # each row sees the batch's mean

    return Candidate("planted_row_dependent", base.op, forward, lambda m, d: "planted: rows see the batch")


def _not_repeatable(base: Candidate) -> Candidate:
    calls = itertools.count()

    def forward(t: dict[str, torch.Tensor]) -> torch.Tensor:
        out = base.forward(t)
        bump = torch.zeros_like(out).reshape(-1)
        bump[next(calls) % bump.numel()] = 1.0  # another element every call
        return out + bump.reshape(out.shape)

    return Candidate("planted_not_repeatable", base.op, forward, lambda m, d: "planted: a random element moves")


def planted(op: OpSpec, inputs: dict[str, torch.Tensor], grad_out: torch.Tensor) -> list[dict]:
    reference = get_candidate(op.name, "rl_kernel")
    ref_result, ref_reps = evaluate_repeated(reference, op, inputs, grad_out, 2)
    off, off_reps = evaluate_repeated(_three_ulps_off(reference), op, inputs, grad_out, 2)
    out = compare_results(op, off, ref_result, off_reps, ref_reps)["out"][0]
    numel = out["numel"]
    found = [
        _property("3 ULPs off: every element differs by 3 ULPs", out["differ"] == numel and out["ulp_max"] == 3, out)
    ]
    _, reps = evaluate_repeated(_not_repeatable(reference), op, inputs, grad_out, 2)
    found.append(_property("not repeatable: the repeatability check marks it", reps["out.0"] > 0, reps))
    sizes = Sizes(full_batch=8, sub_batch_sizes=(4,), accuracy=(1,), seeds=(3,), all_rows=(8,))
    checked = Checker(_row_dependent(reference), op, get_mode("plain"), torch.device("cpu"), sizes).all_rows()
    found.append(_property("row-dependent: the all-rows check flags it", checked["8"]["fwd_differ"] > 0, checked))
    return found


def run() -> list[dict]:
    """Every property, in order (see the module docstring)."""
    load_adapters()
    rng = random.Random(SEED)
    found = []
    for name, rows in CASES.items():
        op = get_op(name)
        inputs, grad_out = draw_inputs(op, rows, seed=rows), draw_grad_out(op, rows, seed=rows)
        for cand in ("diffusers", "rl_kernel"):
            result, _ = evaluate_repeated(get_candidate(op.name, cand), op, inputs, grad_out, 1)
            found += bit_flips(f"{name} {cand}", tensors_of(result), rng)
        if name == "gate_residual":
            found += planted(op, inputs, grad_out)
    return found + special_values()


def main(result_path: str) -> int:
    torch.backends.cuda.matmul.allow_tf32 = False
    Path(result_path).write_text(json.dumps(run()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
