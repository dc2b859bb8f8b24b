"""Tensor- and sequence-parallel layouts: how an op's inputs are sharded across ranks and how the
ranks' results are put back together.

A layout says, per input, whether it is split along a dimension, replicated, or held by rank 0
alone (zeros elsewhere, e.g. the bias of a row-parallel linear); whether the output is gathered
along a dimension or summed over the ranks' partial outputs; and how the upstream gradient is
split. The gradients follow from the inputs: a split input's gradient is gathered along the same
dimension (every element computed by one rank: no reduction), a replicated input's gradient is
the sum of the ranks' partial gradients (a reduction), a rank-0 input's gradient is rank 0's.

Contracts that follow (and that ``audit parallel`` measures rather than assumes):
- gathered tensors keep each element's term order, so they are bitwise the single-process ones
  whenever the kernel's per-element order does not depend on the shard shape (column-parallel
  output and weight gradients; a batch-invariant kernel's rows under ``sp_rows``);
- reduced tensors are a sum of rounded partials; the fixed-order reduction (every rank's partial,
  summed in rank order) is deterministic, the backend's all-reduce may not be, and neither is the
  single-process bits in general.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch

from audit.core.names import UNEVEN_RULE
from audit.core.ops import OpSpec

Placement = int | Literal["replicate", "rank0"]


@dataclass(frozen=True)
class Layout:
    name: str
    inputs: dict[str, Placement] = field(default_factory=dict)  # absent: replicate
    out: int | Literal["reduce"] = 0  # gather along this dim, or sum the partial outputs
    grad_out: int | Literal["replicate"] = 0  # the upstream gradient split along this dim, or whole

    def placement(self, name: str) -> Placement:
        return self.inputs.get(name, "replicate")

    def reduced(self, op: OpSpec) -> tuple[str, ...]:
        """The tensors combined by a reduction: the output when partial outputs are summed, and the
        gradients of replicated inputs (as ``d<input>``)."""
        out = ("out",) if self.out == "reduce" else ()
        return out + tuple(f"d{n}" for n in op.grads if self.placement(n) == "replicate")


LAYOUTS: dict[tuple[str, str], Layout] = {
    # column-parallel: the output features (w's rows, b) split; temb's gradient is a reduction
    ("adaln_projection", "tp_column"): Layout("tp_column", {"w": 0, "b": 0}, out=1, grad_out=1),
    # row-parallel: the 2688-wide reduction split (temb's and w's columns); partial outputs summed
    ("adaln_projection", "tp_row"): Layout(
        "tp_row", {"temb": 1, "w": 1, "b": "rank0"}, out="reduce", grad_out="replicate"
    ),
    ("adaln_projection", "sp_rows"): Layout("sp_rows", {"temb": 0}),
    # the second linear column-parallel
    ("timestep_mlp", "tp_column"): Layout("tp_column", {"w2": 0, "b2": 0}, out=1, grad_out=1),
    # the first linear column-parallel, the second row-parallel (Megatron's MLP split)
    ("timestep_mlp", "tp_row"): Layout(
        "tp_row", {"w1": 0, "b1": 0, "w2": 1, "b2": "rank0"}, out="reduce", grad_out="replicate"
    ),
    ("timestep_mlp", "sp_rows"): Layout("sp_rows", {"x": 0}),
    ("norm_modulate", "sp_rows"): Layout("sp_rows", {"x": 0, "idx": 0}),
    ("gate_residual", "sp_rows"): Layout("sp_rows", {"res": 0, "y": 0, "idx": 0}),
    ("gate_residual_norm_modulate", "sp_rows"): Layout("sp_rows", {"res": 0, "y": 0, "idx": 0}),
    ("timestep_sinusoid", "sp_rows"): Layout("sp_rows", {"t": 0}),
    ("final_adaln_out", "sp_rows"): Layout("sp_rows", {"x": 0, "idx": 0}),
}


def layout_for(op: str, layout: str) -> Layout:
    """The layout; KeyError names the layouts the op has."""
    try:
        return LAYOUTS[(op, layout)]
    except KeyError:
        have = [name for (o, name) in LAYOUTS if o == op]
        raise KeyError(f"op {op} has no layout {layout!r}; it has {', '.join(have)}") from None


def shard(t: torch.Tensor, placement: Placement, rank: int, ranks: int) -> torch.Tensor:
    if placement == "replicate":
        return t
    if placement == "rank0":
        return t if rank == 0 else torch.zeros_like(t)
    return t.tensor_split(ranks, dim=placement)[rank].contiguous()


def shard_shapes(op: OpSpec, layout: Layout, *, rows: int, ranks: int, rank: int) -> dict[str, tuple[int, ...]]:
    """Each input's shape on ``rank``: its ``torch.tensor_split`` share of every split dimension."""
    shapes = {}
    for spec in op.inputs:
        shape = list(spec.shape(rows))
        where = layout.placement(spec.name)
        if isinstance(where, int):
            shape[where] = shape[where] // ranks + (rank < shape[where] % ranks)
        shapes[spec.name] = tuple(shape)
    return shapes


def split_problem(op: OpSpec, layout: Layout, rows: int, ranks: int) -> str | None:
    """Why ``ranks`` cannot split this op's inputs for ``rows`` rows (None when they can): every rank
    needs a share, and a split may be uneven only along the row dimension of a row op (``UNEVEN_RULE``):
    such an op computes each row from that row alone, whatever the shard's size."""
    for spec in op.inputs:
        where = layout.placement(spec.name)
        if not isinstance(where, int):
            continue
        size = spec.shape(rows)[where]
        if size < ranks:
            return f"{spec.name}'s dimension {where} ({size}) has fewer elements than the {ranks} ranks"
        if size % ranks and not (op.kind == "row" and spec.rows and where == 0):
            return f"{spec.name}'s dimension {where} ({size}) does not split into {ranks} equal shards ({UNEVEN_RULE})"
    return None
