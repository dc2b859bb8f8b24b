"""How rl_kernel_ops's extension is linked: a C++ check that refuses its input raises RuntimeError
with its message, numbers formatted in, whatever libstdc++ the toolchain links (``_build``)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from tests.helpers import REPO

pytestmark = pytest.mark.cuda

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

REFUSALS = """
import torch
from rl_kernel_ops import _build
_build.load_extension()
ops, B = torch.ops.rl_kernel_ops, torch.bfloat16
calls = {
    "adaln_proj_forward": lambda: ops.adaln_proj_forward(
        torch.ones(2, 8, dtype=B, device="cuda"), torch.ones(16, 8, dtype=B, device="cuda"),
        torch.ones(16, dtype=B, device="cuda")),
    "row_sort_plan": lambda: ops.row_sort_plan(torch.zeros(64, dtype=torch.long, device="cuda"), 257, 64),
}
for name, call in calls.items():
    try:
        call()
    except RuntimeError as e:
        print(name, "|", str(e).splitlines()[0])
"""


def test_a_refused_input_whose_message_formats_a_number_raises():
    """In a process of its own, so that a crash fails this test alone. Both checks format a number
    into their message (a dimension, a limit): the path that kills the process where the extension
    exports a copy of libstdc++ beside the process's own (docs/evidence/h200/libstdcxx/)."""
    done = subprocess.run([sys.executable, "-c", REFUSALS], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    raised = dict(line.split(" | ", 1) for line in done.stdout.splitlines())
    assert raised == {
        "adaln_proj_forward": "adaln_proj_forward: temb must be a contiguous 2-D Float CUDA tensor",
        "row_sort_plan": "row_sort_plan: at most 256 table rows",
    }
