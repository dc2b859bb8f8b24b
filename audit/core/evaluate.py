"""One forward and backward pass of a candidate, the way every check runs it."""

from __future__ import annotations

import contextlib
from typing import Callable, ContextManager

import torch

from audit.core.candidates import Candidate
from audit.core.ops import OpSpec

Result = tuple[list[torch.Tensor], dict[str, torch.Tensor]]
Phase = Callable[[str], ContextManager]  # "forward" or "backward" -> what that phase runs inside


def _no_phase(name: str) -> ContextManager:
    return contextlib.nullcontext()


def differentiated(c: Candidate, op: OpSpec) -> tuple[str, ...]:
    """The inputs whose gradients ``c`` provides."""
    return op.grads if c.grads is None else tuple(g for g in op.grads if g in c.grads)


def evaluate(
    c: Candidate,
    op: OpSpec,
    inputs: dict[str, torch.Tensor],
    grad_out: torch.Tensor,
    only: tuple[str, ...] | None = None,
    copy_all: bool = True,
    phase: Phase = _no_phase,
) -> Result:
    """Outputs of ``c`` and its gradients for upstream ``grad_out``, w.r.t. the inputs it
    differentiates (or the subset ``only``). Each call gets fresh leaf copies of the inputs, so one
    candidate cannot disturb another's; with ``copy_all=False`` only the differentiated ones are
    copied (the prior-art checks' thousands of one-row passes share the parameters). The forward
    pass runs inside ``phase("forward")`` and the gradients inside ``phase("backward")`` (the
    kernel fingerprints profile each alone); the phases change nothing that is computed."""
    wanted = differentiated(c, op)
    if only is not None:
        wanted = tuple(n for n in wanted if n in only)
    leaves = {
        n: t.detach().clone().requires_grad_(True) if n in wanted else (t.detach().clone() if copy_all else t.detach())
        for n, t in inputs.items()
    }
    with torch.set_grad_enabled(bool(wanted)), phase("forward"):
        out = c.forward(leaves)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    grads: dict[str, torch.Tensor] = {}
    if wanted:
        with phase("backward"):
            got = torch.autograd.grad(outs[0], [leaves[n] for n in wanted], grad_outputs=grad_out, allow_unused=True)
        for name, g in zip(wanted, got):
            if g is None:
                raise RuntimeError(
                    f"output does not depend on input {name!r}, which the candidate declares differentiable"
                )
            grads[name] = g
    return [o.detach() for o in outs], grads
