import math

import pytest
import torch

from audit.compare import compare

DTYPES = [torch.bfloat16, torch.float32]


@pytest.mark.parametrize("dtype", DTYPES)
def test_identical_tensors_are_equal(dtype):
    a = torch.randn(1000, generator=torch.Generator().manual_seed(0)).to(dtype)
    assert compare(a, a.clone()) == {"equal": True, "differ": 0, "numel": 1000, "max_abs": 0.0}


@pytest.mark.parametrize("dtype", DTYPES)
def test_signed_zeros_differ_in_bits_but_not_in_value(dtype):
    a = torch.tensor([0.0, 1.0], dtype=dtype)
    b = torch.tensor([-0.0, 1.0], dtype=dtype)
    assert bool((a == b).all())  # torch's != would call these equal
    r = compare(a, b)
    assert r["equal"] is False and r["differ"] == 1 and r["max_abs"] == 0.0


@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_and_inf_never_hide_a_difference_or_crash(dtype):
    nan, inf = float("nan"), float("inf")
    a = torch.tensor([nan, inf, 1.0, 2.0, -inf], dtype=dtype)
    b = torch.tensor([1.0, inf, 1.5, nan, inf], dtype=dtype)
    r = compare(a, b)
    assert r["equal"] is False
    assert r["differ"] == 4  # nan vs 1, 1 vs 1.5, 2 vs nan, -inf vs inf
    assert r["max_abs"] == 0.5 and math.isfinite(r["max_abs"])


def test_same_nan_bits_are_equal_but_different_payloads_are_not():
    a = torch.tensor([0x7FC00000], dtype=torch.int32).view(torch.float32)
    b = torch.tensor([0x7FC00001], dtype=torch.int32).view(torch.float32)
    assert compare(a, a.clone())["equal"] is True
    r = compare(a, b)
    assert r["equal"] is False and r["differ"] == 1 and r["max_abs"] == 0.0


def test_one_ulp_in_bf16_is_seen():
    a = torch.tensor([1.0], dtype=torch.bfloat16)
    b = torch.tensor([1.0078125], dtype=torch.bfloat16)  # next bf16 after 1.0
    assert compare(a, b) == {"equal": False, "differ": 1, "numel": 1, "max_abs": 0.0078125}


def test_shape_mismatch_is_an_error_entry():
    r = compare(torch.zeros(2, 3), torch.zeros(3, 2))
    assert r["equal"] is False and r["max_abs"] is None and "(2, 3) float32 vs (3, 2) float32" in r["error"]


def test_dtype_mismatch_is_an_error_entry():
    r = compare(torch.zeros(4, dtype=torch.bfloat16), torch.zeros(4))
    assert r["equal"] is False and "bfloat16 vs (4,) float32" in r["error"]


def test_large_tensors_are_compared_in_chunks():
    a = torch.zeros(3 * (1 << 26) // 2, dtype=torch.bfloat16)
    b = a.clone()
    b[-1] = 1.0
    b[0] = -2.0
    assert compare(a, b) == {"equal": False, "differ": 2, "numel": a.numel(), "max_abs": 2.0}
