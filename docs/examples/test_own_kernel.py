"""Auditing your own kernel from your own test suite (README "Audit your own kernel").

Register the kernel as a candidate for an op with ``@candidate`` (beside the function, as the
adapters do), then ask the ``bitwise_audit`` fixture whether it is bitwise the reference. Run with
``python -m pytest docs/examples/test_own_kernel.py`` once the package is installed (``pip
install -e .``): the plugin comes with it, no ``$AUDIT_PLUGINS`` needed.
"""

import torch

from audit.core.candidates import candidate


@candidate("my_gate_residual", ops=("gate_residual",), source="docs/examples: res + gate[idx] * y in eager PyTorch")
def my_gate_residual(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return t["res"] + t["gate"].index_select(0, t["idx"]) * t["y"]


def test_my_gate_residual_is_bitwise_the_reference(bitwise_audit):
    bitwise_audit.assert_reusable("my_gate_residual", op="gate_residual", reference="diffusers", cases=[1, 33])
