"""Input validation shared by both backends of the row ops (``reference_rows`` and ``cuda_rows``).

Both backends accept exactly the same inputs, so a caller sees the same contract on the CPU and on
a GPU: BF16 row tensors and tables, an int64 index vector, hidden size a multiple of 8, every
tensor on one device, indices within the table. CUDA inputs must also be contiguous and 16-byte
aligned, because the kernels read them as 16-byte vectors (a row slice ``t[i:j]`` of a contiguous
tensor always is). Wrong types and dtypes raise TypeError; wrong shapes, devices, layouts and
out-of-range indices raise ValueError. Nothing is launched before the checks pass.

The index range check reads the minimum and maximum back to the host (one synchronization). An
index tensor that passed is remembered (a weak reference and its version counter, which every
in-place torch op bumps), so reusing the same unmodified idx, as every block of a model does,
skips the round trip; a view, a copy or a modified tensor is checked again.
"""

from __future__ import annotations

import weakref

import torch

from ._checks import require_tensor

MAX_HIDDEN = 16384  # the widest row the norm_modulate row kernels keep in registers


def _same_device(tensors: dict[str, torch.Tensor]) -> torch.device:
    devices = {name: t.device for name, t in tensors.items()}
    first = next(iter(devices.values()))
    if any(d != first for d in devices.values()):
        raise ValueError(f"all inputs must be on one device, got {devices}")
    if first.type == "cuda":
        for name, t in tensors.items():
            if name == "idx":
                continue
            if not t.is_contiguous():
                raise ValueError(f"{name} must be contiguous for the CUDA kernels")
            if t.data_ptr() % 16:
                raise ValueError(
                    f"{name} must be 16-byte aligned for the CUDA kernels (storage offset {t.storage_offset()})"
                )
    return first


_checked: dict[int, tuple[weakref.ref, int, int]] = {}  # id(idx) -> (ref, version, max + 1)


def _version(idx: torch.Tensor) -> int | None:
    try:
        return idx._version
    except RuntimeError:  # inference tensors keep no version counter: never remembered
        return None


def _index(idx: torch.Tensor, rows: int, table_rows: int) -> None:
    if idx.shape[0] != rows:
        raise ValueError(f"idx must have one entry per row ({rows}), got {idx.shape[0]}")
    if table_rows < 1:
        raise ValueError("the table must have at least one row")
    if not idx.numel():
        return
    version = _version(idx)
    seen = _checked.get(id(idx))
    if seen is not None and seen[0]() is idx and seen[1] == version and seen[2] <= table_rows:
        return
    lo, hi = torch.stack(torch.aminmax(idx)).tolist()
    if lo < 0 or hi >= table_rows:
        raise ValueError(f"idx values must lie in [0, {table_rows}), got min {lo} and max {hi}")
    if version is not None:
        if len(_checked) >= 64:
            _checked.clear()
        _checked[id(idx)] = (weakref.ref(idx), version, hi + 1)


def _hidden(hidden: int, limit: int | None = None) -> None:
    if hidden % 8:
        raise ValueError(f"the hidden size must be a multiple of 8, got {hidden}")
    if limit is not None and hidden > limit:
        raise ValueError(f"the hidden size must be at most {limit}, got {hidden}")


def check_norm_modulate(x, w, shift, scale, idx, eps) -> None:
    bf16 = torch.bfloat16
    require_tensor("x", x, bf16, 2)
    require_tensor("w", w, bf16, 1)
    require_tensor("shift", shift, bf16, 2)
    require_tensor("scale", scale, bf16, 2)
    require_tensor("idx", idx, torch.int64, 1)
    if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not eps >= 0:
        raise TypeError(f"eps must be a non-negative float, got {eps!r}")
    hidden = x.shape[1]
    _hidden(hidden, MAX_HIDDEN)
    if w.shape[0] != hidden or shift.shape[1] != hidden or shift.shape != scale.shape:
        raise ValueError(
            f"shapes do not match: x {tuple(x.shape)}, w {tuple(w.shape)}, "
            f"shift {tuple(shift.shape)}, scale {tuple(scale.shape)}"
        )
    _same_device({"x": x, "w": w, "shift": shift, "scale": scale, "idx": idx})
    _index(idx, x.shape[0], shift.shape[0])


def check_gate_residual(res, y, gate, idx) -> None:
    bf16 = torch.bfloat16
    require_tensor("res", res, bf16, 2)
    require_tensor("y", y, bf16, 2)
    require_tensor("gate", gate, bf16, 2)
    require_tensor("idx", idx, torch.int64, 1)
    _hidden(res.shape[1])
    if y.shape != res.shape or gate.shape[1] != res.shape[1]:
        raise ValueError(f"shapes do not match: res {tuple(res.shape)}, y {tuple(y.shape)}, gate {tuple(gate.shape)}")
    _same_device({"res": res, "y": y, "gate": gate, "idx": idx})
    _index(idx, res.shape[0], gate.shape[0])


def check_row_gather(table, idx) -> None:
    require_tensor("table", table, torch.bfloat16, 2)
    require_tensor("idx", idx, torch.int64, 1)
    _hidden(table.shape[1])
    _same_device({"table": table, "idx": idx})
    _index(idx, idx.shape[0], table.shape[0])
