"""The CPU fingerprint's counts (``audit.core.kernels._cpu_counts``) are torch's own event list's."""

from __future__ import annotations

import contextlib
from collections import Counter

import pytest
import torch
from torch.autograd import DeviceType

from audit.core import kernels
from audit.core.candidates import get_candidate
from audit.core.evaluate import evaluate
from audit.core.inputs import draw_grad_out, draw_inputs
from audit.core.ops import get_op


def _from_event_list(prof) -> dict[str, int]:
    names = (
        e.name
        for e in prof.events()
        if e.device_type == DeviceType.CPU
        and not e.is_user_annotation
        and not e.name.startswith(kernels._ENGINE_WRAPPER)
    )
    return dict(sorted(Counter(names).items()))


# diffusers' RMSNorm records nested same-name calls (aten::div_ in aten::div_), which the event list
# counts once; rl_kernel's oracle backward has thousands of operators and autograd nodes
@pytest.mark.parametrize("op_name, name", [("norm_modulate", "diffusers"), ("gate_residual", "rl_kernel")])
def test_the_raw_counts_equal_the_event_lists(op_name, name):
    op, c = get_op(op_name), get_candidate(op_name, name)
    compared = []

    @contextlib.contextmanager
    def phase(_name: str):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            yield
        compared.append((kernels._cpu_counts(prof), _from_event_list(prof)))

    evaluate(c, op, draw_inputs(op, 257, seed=1), draw_grad_out(op, 257, seed=1), phase=phase)
    assert len(compared) == 2 and all(sum(mine.values()) > 10 for mine, _ in compared)
    for mine, theirs in compared:
        assert mine == theirs
