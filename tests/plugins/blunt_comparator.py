"""Test double (loaded through $AUDIT_PLUGINS): breaks the comparator on purpose, so that it no
longer sees the last mantissa bit, as a comparator bug might. ``audit selftest`` must catch it."""

import torch

import audit.core.compare

_sharp = audit.core.compare.bit_patterns


def _blunt(t: torch.Tensor) -> torch.Tensor:
    bits = _sharp(t)
    return bits & ~1 if t.dtype.is_floating_point else bits


audit.core.compare.bit_patterns = _blunt
