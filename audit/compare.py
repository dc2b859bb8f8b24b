"""Bitwise comparison of two tensors (SPEC.md section 8).

``equal`` is true only when every element has the same bit pattern; ``differ`` counts elements
whose bits differ (so -0.0 vs +0.0 and NaNs with different payloads count, and NaN vs NaN with the
same payload does not); ``max_abs`` is the largest |a - b| in float64 over the elements where both
are finite (0.0 when there is none). A NaN or Inf mismatch therefore always shows in ``differ`` and
never makes a comparison crash or report equal. Mismatched shapes or dtypes give an entry with
``error`` set instead of raising.
"""

from __future__ import annotations

import torch

_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_CHUNK = 1 << 26  # elements per step: bounds the float64 temporaries


def bit_patterns(t: torch.Tensor) -> torch.Tensor:
    """Floating-point tensors as integers of the same width (their bit patterns); others as they are."""
    return t.view(_BITS[t.element_size()]) if t.dtype.is_floating_point else t


def compare(a: torch.Tensor, b: torch.Tensor) -> dict:
    """Compare ``a`` with reference ``b`` bit for bit; both on one device. Returns the report's cmp
    dict: {equal, differ, numel, max_abs} (plus ``error`` when the two cannot be compared)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return {
            "equal": False,
            "differ": max(a.numel(), b.numel()),
            "numel": b.numel(),
            "max_abs": None,
            "error": f"{tuple(a.shape)} {str(a.dtype).removeprefix('torch.')} vs "
            f"{tuple(b.shape)} {str(b.dtype).removeprefix('torch.')}",
        }
    if a.device != b.device:
        b = b.to(a.device)
    fa, fb = a.detach().reshape(-1), b.detach().reshape(-1)
    differ = 0
    max_abs = 0.0
    for start in range(0, fa.numel(), _CHUNK):
        ca, cb = fa[start : start + _CHUNK], fb[start : start + _CHUNK]
        differ += int((bit_patterns(ca) != bit_patterns(cb)).sum())
        if ca.dtype.is_floating_point or ca.dtype.is_complex:
            da, db = ca.double(), cb.double()
            finite = torch.isfinite(da) & torch.isfinite(db)
            if bool(finite.any()):
                max_abs = max(max_abs, float((da - db).abs()[finite].max()))
        elif ca.numel():
            max_abs = max(max_abs, float((ca.double() - cb.double()).abs().max()))
    return {"equal": differ == 0, "differ": differ, "numel": fa.numel(), "max_abs": max_abs}
