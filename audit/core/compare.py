"""Bitwise comparison of two tensors.

``equal`` is true only when every element has the same bit pattern; ``differ`` counts elements
whose bits differ (so -0.0 vs +0.0 and NaNs with different payloads count, and NaN vs NaN with the
same payload does not); ``max_abs`` is the largest |a - b| in float64 over the elements where both
are finite (0.0 when there is none). A NaN or Inf mismatch therefore always shows in ``differ`` and
never makes a comparison crash or report equal. Mismatched shapes or dtypes give an entry with
``error`` set instead of raising.

When floating-point bits differ, the entry also says where and how far:
- ``first_differ``: the first differing element in row-major order, as a multi-index;
- ``ulp_max``: the largest distance in units in the last place of the dtype, over differing
  elements finite on both sides (null when every differing element involves a NaN or an Inf).
  The distance is the difference of a monotone integer mapping of the bits (sign-magnitude folded
  onto the integers, -0.0 just below +0.0), so -0.0 vs +0.0 is 1 and the smallest subnormal is 1
  away from zero;
- ``ulp_hist``: differing elements per bucket ``1``, ``2``, ``3-4``, ``5-8``, ... ``524289-1048576``,
  ``>1048576``, and ``non-finite`` (a NaN or Inf on either side); only non-empty buckets appear.
"""

from __future__ import annotations

import torch

_BITS = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}  # signed: ordered_bits shifts them
_CHUNK = 1 << 26  # elements per step: bounds the float64 temporaries
HIST_TOP = 20  # the last finite bucket ends at 2**HIST_TOP ulp
INT64_MAX = torch.iinfo(torch.int64).max


def bit_patterns(t: torch.Tensor) -> torch.Tensor:
    """Floating-point tensors as integers of the same width (their bit patterns); others as they are."""
    return t.view(_BITS[t.element_size()]) if t.dtype.is_floating_point else t


def hist_labels() -> list[str]:
    """The ULP histogram's bucket names, in order."""
    labels = ["1", "2"] + [f"{2 ** (k - 1) + 1}-{2**k}" for k in range(2, HIST_TOP + 1)]
    return labels + [f">{2**HIST_TOP}", "non-finite"]


def ordered_bits(t: torch.Tensor) -> torch.Tensor:
    """Float bits as integer keys whose order is the numbers' order: +x maps to its magnitude bits,
    -x to ``-magnitude - 1`` (so -0.0 is -1, +0.0 is 0), in the bits' own width: flipping a
    negative pattern's magnitude bits gives exactly that."""
    width = 8 * t.element_size()
    bits = t.view(_BITS[t.element_size()])
    return bits ^ ((bits >> (width - 1)) & ((1 << (width - 1)) - 1))


def ulp_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """|key(a) - key(b)| per element, saturated at INT64_MAX (only float64 values of opposite sign
    and huge magnitude can get there): int32 for 16-bit floats (at most 2**16), int64 otherwise."""
    ka, kb = ordered_bits(a), ordered_bits(b)
    if ka.element_size() <= 2:
        return (ka.to(torch.int32) - kb.to(torch.int32)).abs()
    if ka.element_size() == 4:
        return (ka.to(torch.int64) - kb.to(torch.int64)).abs()
    hi, lo = torch.maximum(ka, kb), torch.minimum(ka, kb)
    # hi - lo overflows only when hi >= 0 > lo and hi > INT64_MAX + lo
    overflow = (lo < 0) & (hi > INT64_MAX + lo)
    return torch.where(overflow, torch.full_like(hi, INT64_MAX), hi - torch.where(overflow, 0, lo))


_BOUNDS = torch.tensor([2**k for k in range(HIST_TOP + 1)])  # bucket k holds (2**(k-1), 2**k]


def _bucket(distance: torch.Tensor) -> torch.Tensor:
    """Bucket index per distance >= 1: ceil(log2(d)), HIST_TOP + 1 for d > 2**HIST_TOP."""
    return torch.bucketize(distance, _BOUNDS.to(distance.device, distance.dtype))


class _Where:
    """Accumulates first_differ, ulp_max and ulp_hist over the chunks of one comparison."""

    def __init__(self, shape: torch.Size):
        self.shape = shape
        self.first: int | None = None
        self.ulp_max: int | None = None
        self.hist = [0] * (HIST_TOP + 3)

    def add(self, first: int, da: torch.Tensor, db: torch.Tensor, *, finite: torch.Tensor) -> None:
        """One chunk's differing elements ``da``, ``db`` (at least one), the first at flat index
        ``first``; ``finite`` marks those finite on both sides."""
        if self.first is None:
            self.first = first
        both = int(finite.sum())
        self.hist[-1] += da.numel() - both
        if both:
            if both < da.numel():
                da, db = da[finite], db[finite]
            dist = ulp_distance(da, db)
            top = int(dist.max())
            self.ulp_max = top if self.ulp_max is None else max(self.ulp_max, top)
            for index, count in enumerate(torch.bincount(_bucket(dist), minlength=HIST_TOP + 2).tolist()):
                self.hist[index] += count

    def fields(self) -> dict:
        index, first = [], self.first
        for size in reversed(self.shape):
            first, i = divmod(first, size)
            index.append(i)
        hist = {label: n for label, n in zip(hist_labels(), self.hist) if n}
        return {"first_differ": index[::-1], "ulp_max": self.ulp_max, "ulp_hist": hist}


def count_differ(a: torch.Tensor, b: torch.Tensor) -> int:
    """Elements of two same-shape, same-dtype tensors whose bits differ."""
    fa, fb = a.detach().reshape(-1), b.detach().reshape(-1)
    return sum(
        int((bit_patterns(fa[s : s + _CHUNK]) != bit_patterns(fb[s : s + _CHUNK])).sum())
        for s in range(0, fa.numel(), _CHUNK)
    )


def compare(a: torch.Tensor, b: torch.Tensor) -> dict:
    """Compare ``a`` with reference ``b`` bit for bit; both on one device. Returns the report's cmp
    dict: {equal, differ, numel, max_abs}, plus first_differ, ulp_max and ulp_hist when floating
    bits differ (``error`` instead when the two cannot be compared)."""
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
    floating = fa.dtype.is_floating_point
    where = _Where(a.shape) if floating else None
    differ = 0
    max_abs = 0.0
    for start in range(0, fa.numel(), _CHUNK):
        ca, cb = fa[start : start + _CHUNK], fb[start : start + _CHUNK]
        positions = (bit_patterns(ca) != bit_patterns(cb)).nonzero().flatten()
        if not positions.numel():  # equal bits: |a - b| is 0 wherever both are finite
            continue
        differ += positions.numel()
        da, db = ca[positions], cb[positions]  # max_abs and the rest need only these
        if floating or ca.dtype.is_complex:
            gap = (da.double() - db.double()).abs()  # NaN where either side is not finite, or both are the same Inf
            finite = torch.isfinite(da) & torch.isfinite(db)
            max_abs = max(max_abs, float(torch.where(finite, gap, 0.0).max()))
            if where is not None:
                where.add(start + int(positions[0]), da, db, finite=finite)
        else:
            max_abs = max(max_abs, float((da.double() - db.double()).abs().max()))
    entry = {"equal": differ == 0, "differ": differ, "numel": fa.numel(), "max_abs": max_abs}
    if differ and where is not None:
        entry |= where.fields()
    return entry
