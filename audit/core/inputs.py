"""Deterministic inputs: drawn from seeded CPU generators, so every process and every machine
builds the same bits, then moved to the device.

Row inputs (and the upstream gradient) use the case seed; shared parameters and tables use seed 1.
"""

from __future__ import annotations

import hashlib

import torch

from audit.core.ops import (
    GRAD_OUT_SALT,
    MODALITIES,
    PARAM_SEED,
    TIMESTEPS,
    InputSpec,
    Normal,
    OpSpec,
    PackedIndex,
    TimestepIndex,
    UniformOffset,
)


def _generator(seed: int, salt: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed * 1000 + salt)


def seeded_normal(seed: int, salt: int, shape: tuple[int, ...], dtype: torch.dtype, scale: float = 1.0) -> torch.Tensor:
    """Upstream's convention: ``(randn(shape, generator=seed*1000+salt) * scale).to(dtype)``."""
    return (torch.randn(shape, generator=_generator(seed, salt)) * scale).to(dtype)


def packed_index(seed: int, rows: int) -> torch.Tensor:
    """``idx = ti * 3 + tags`` with tags and timestep indices drawn from one generator seeded with
    ``seed``; the first three tags are forced to video, text, audio so every modality occurs."""
    g = torch.Generator().manual_seed(seed)
    tags = torch.randint(0, MODALITIES, (rows,), generator=g)
    ti = torch.randint(0, TIMESTEPS, (rows,), generator=g)
    head = min(rows, MODALITIES)
    tags[:head] = torch.arange(head)
    return ti * MODALITIES + tags


def draw_input(spec: InputSpec, rows: int, seed: int) -> torch.Tensor:
    s = seed if spec.rows else PARAM_SEED
    shape = spec.shape(rows)
    match spec.draw:
        case Normal(salt, scale):
            return seeded_normal(s, salt, shape, spec.dtype, scale)
        case UniformOffset(salt, offset):
            return (offset + torch.rand(shape, generator=_generator(s, salt))).to(spec.dtype)
        case PackedIndex():
            return packed_index(s, rows)
        case TimestepIndex():
            return packed_index(s, rows) // MODALITIES
    raise TypeError(f"unknown draw {spec.draw!r}")


def draw_inputs(op: OpSpec, rows: int, seed: int, shared: dict | None = None) -> dict[str, torch.Tensor]:
    """All of ``op``'s inputs for ``rows`` rows, on the CPU, in the op's input order. ``shared``, a
    dict kept across calls, holds the inputs that do not depend on the case (parameters and
    tables: seed ``PARAM_SEED``, a shape without rows), so each is drawn once: the same bits, the
    same tensor object each time."""

    def one(spec: InputSpec) -> torch.Tensor:
        if shared is None or spec.rows:
            return draw_input(spec, rows, seed)
        key = (spec.name, spec.shape(rows))
        if key not in shared:
            shared[key] = draw_input(spec, rows, seed)
        return shared[key]

    return {spec.name: one(spec) for spec in op.inputs}


def draw_grad_out(op: OpSpec, rows: int, seed: int) -> torch.Tensor:
    """The fixed upstream gradient of the output for this case (case seed, salt 99)."""
    return seeded_normal(seed, GRAD_OUT_SALT, op.out_shape(rows), op.out_dtype)


def fingerprint(tensors: dict[str, torch.Tensor]) -> str:
    """sha256 over each tensor's name, dtype, shape and raw bytes, in order."""
    h = hashlib.sha256()
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()
