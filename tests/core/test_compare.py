import math

import pytest
import torch

from audit.core.compare import INT64_MAX, compare, ordered_bits, ulp_distance

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
    assert compare(a, b) == {
        "equal": False,
        "differ": 1,
        "numel": 1,
        "max_abs": 0.0078125,
        "first_differ": [0],
        "ulp_max": 1,
        "ulp_hist": {"1": 1},
    }


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
    r = compare(a, b)
    assert {k: r[k] for k in ("equal", "differ", "numel", "max_abs")} == {
        "equal": False,
        "differ": 2,
        "numel": a.numel(),
        "max_abs": 2.0,
    }
    # first_differ is found in the first chunk, the histogram counts both chunks
    assert r["first_differ"] == [0] and sum(r["ulp_hist"].values()) == 2


# -- where and how far bits differ -----------------------------------------------------------


def _bits(values, dtype):
    """Tensors of ``dtype`` from raw bit patterns."""
    int_type = {torch.bfloat16: torch.int16, torch.float32: torch.int32, torch.float64: torch.int64}[dtype]
    return torch.tensor(values, dtype=torch.int64).to(int_type).view(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_signed_zeros_are_one_ulp_apart(dtype):
    r = compare(torch.tensor([0.0], dtype=dtype), torch.tensor([-0.0], dtype=dtype))
    assert r["ulp_max"] == 1 and r["ulp_hist"] == {"1": 1} and r["first_differ"] == [0]


@pytest.mark.parametrize("dtype, smallest", [(torch.bfloat16, 0x0001), (torch.float32, 0x00000001)])
def test_subnormals_count_ulps_through_zero(dtype, smallest):
    tiny = _bits([smallest], dtype)
    assert float(tiny) > 0 and float(tiny) < torch.finfo(dtype).tiny  # a real subnormal
    assert compare(tiny, torch.zeros(1, dtype=dtype))["ulp_max"] == 1
    # -tiny, -0, +0, +tiny: three steps
    assert compare(-tiny, tiny)["ulp_max"] == 3
    # the largest subnormal and the smallest normal are neighbours
    top = _bits([smallest * ((1 << (7 if dtype == torch.bfloat16 else 23)) - 1)], dtype)
    normal = torch.tensor([torch.finfo(dtype).tiny], dtype=dtype)
    assert compare(top, normal)["ulp_max"] == 1


def test_ulp_distance_and_histogram_in_bf16():
    one = 1.0
    step = 2.0**-7  # bf16 ulp at 1.0
    a = torch.tensor([one, one, one, one, one, 2.0, 7.0], dtype=torch.bfloat16)
    b = torch.tensor([one + step, one + 2 * step, one + 4 * step, one + 5 * step, one, 2.0, -7.0], dtype=torch.bfloat16)
    r = compare(a, b)
    assert r["differ"] == 5
    assert r["first_differ"] == [0]
    # 7.0 vs -7.0 in bf16: 2 * 0x40E0 + 1 = 33217 steps apart
    assert r["ulp_max"] == 2 * 0x40E0 + 1
    assert r["ulp_hist"] == {"1": 1, "2": 1, "3-4": 1, "5-8": 1, "32769-65536": 1}


def test_ulp_distance_in_fp32_and_the_top_bucket():
    a = torch.tensor([[1.0, 1.0], [1.0, 1.0]], dtype=torch.float32)
    b = a.clone()
    b[1, 0] = float(torch.nextafter(torch.tensor(1.0), torch.tensor(2.0)))
    b[1, 1] = 2.0  # 2**23 fp32 ulps above 1.0
    r = compare(a, b)
    assert r["first_differ"] == [1, 0]
    assert r["ulp_max"] == 2**23
    assert r["ulp_hist"] == {"1": 1, ">1048576": 1}


def test_non_finite_differences_have_no_ulp_distance():
    nan, inf = float("nan"), float("inf")
    a = torch.tensor([nan, inf, 1.0], dtype=torch.float32)
    b = torch.tensor([1.0, -inf, 1.0], dtype=torch.float32)
    r = compare(a, b)
    assert r["differ"] == 2 and r["ulp_max"] is None and r["ulp_hist"] == {"non-finite": 2}


def test_first_differ_is_a_row_major_multi_index():
    a = torch.zeros(3, 4, 5)
    b = a.clone()
    b[2, 1, 3] = 1.0
    b[2, 3, 0] = 1.0
    assert compare(a, b)["first_differ"] == [2, 1, 3]


def test_equal_tensors_carry_no_where_fields():
    a = torch.ones(5)
    assert set(compare(a, a.clone())) == {"equal", "differ", "numel", "max_abs"}


def test_fp64_of_opposite_sign_and_huge_magnitude_saturates_instead_of_wrapping():
    big = torch.tensor([1e308], dtype=torch.float64)
    assert int(ulp_distance(big, -big)[0]) == INT64_MAX
    assert (
        int(ulp_distance(torch.tensor([1.0], dtype=torch.float64), torch.tensor([-1.0], dtype=torch.float64))[0])
        == 2 * 0x3FF0000000000000 + 1
    )


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_every_16_bit_pattern_gets_a_key_in_the_order_of_its_value(dtype):
    """Over all 65536 patterns: the keys are the integers -32768 .. 32767, each once (so adjacent
    keys are one ULP apart), and sorting by key sorts the non-NaN values (-0.0 just below +0.0)."""
    patterns = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype)
    keys = ordered_bits(patterns).to(torch.int32)
    assert torch.equal(keys.sort().values, torch.arange(-32768, 32768, dtype=torch.int32))
    by_key = patterns[keys.argsort()].double()
    finite = by_key[~by_key.isnan()]
    assert bool((finite[1:] >= finite[:-1]).all())
    assert int(ulp_distance(patterns, patterns.neg()).max()) == 65535  # the two extreme keys, apart in int32
