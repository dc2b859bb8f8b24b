"""The attempt's overlapped kernel of 256-thread blocks, dx blocks of two rows sharing the table
vectors (variant 4; 5 with the partial blocks' ring), the overlapped kernel whose partial blocks
wait for the dx blocks (10, 11, 12: at most 8, 16, 4 positions ahead; 13: variant 4 with 8), against the split kernels,
bitwise, at the shapes of tests/cuda/test_rl_kernel_rows.py's backward test (variant 2: HEAD's
overlapped kernel, for reference)."""

import pytest
import torch

from audit.core.compare import bit_patterns
from audit.core.inputs import packed_index
from rl_kernel_ops import _build, cuda_rows

R, EPS, BF16, DEV = 9, 1e-5, torch.bfloat16, "cuda"


def same_bits(a, b):
    return torch.equal(bit_patterns(a), bit_patterns(b))


@pytest.mark.parametrize("rows", [1, 64, 257, 4097, 8192])
@pytest.mark.parametrize("hidden", [8, 1032, 5376, 16384])
@pytest.mark.parametrize("variant", [2, 4, 5, 10, 11, 12, 13])
def test_dx_rows_have_the_split_kernels_bits(rows, hidden, variant):
    _build.load_extension()
    gen = torch.Generator().manual_seed(rows + hidden)
    x = (torch.randn(rows, hidden, generator=gen) * 2).to(BF16).to(DEV)
    w = (0.5 + torch.rand(hidden, generator=gen)).to(BF16).to(DEV)
    shift, scale, g = (
        (torch.randn(n, hidden, generator=gen) * s).to(BF16).to(DEV) for n, s in ((R, 0.1), (R, 0.1), (rows, 1))
    )
    idx = packed_index(3, rows).to(DEV)
    ops = torch.ops.rl_kernel_ops
    _, rstd = ops.norm_modulate_fwd(x, w, shift, scale, idx, EPS)
    plan = (*cuda_rows._plan(ops, idx, R), cuda_rows.TILE_ROWS)
    real = int(plan[2][-1])
    dx = ops.norm_modulate_bwd_dx(g, x, rstd, w, scale, idx)
    partials = ops.norm_modulate_bwd_partials(g, x, rstd, w, scale, *plan)[:, :real]
    for _ in range(2):
        one_dx, one_partials = ops.norm_modulate_bwd(g, x, rstd, w, scale, idx, *plan, variant)
        assert same_bits(one_dx, dx)
        assert same_bits(one_partials[:, :real], partials)


@pytest.mark.parametrize("rows", [1, 64, 257, 4097, 8192])
@pytest.mark.parametrize("hidden", [8, 1032, 5376, 16384])
@pytest.mark.parametrize("variant", [6, 7, 8, 9])
def test_one_kind_of_block_has_the_split_kernels_bits(rows, hidden, variant):
    """Variants 6 and 8: the overlapped kernels' partial blocks alone (partials); 7 and 9: their dx
    blocks alone (dx), against the split kernels."""
    _build.load_extension()
    gen = torch.Generator().manual_seed(rows + hidden)
    x = (torch.randn(rows, hidden, generator=gen) * 2).to(BF16).to(DEV)
    w = (0.5 + torch.rand(hidden, generator=gen)).to(BF16).to(DEV)
    shift, scale, g = (
        (torch.randn(n, hidden, generator=gen) * s).to(BF16).to(DEV) for n, s in ((R, 0.1), (R, 0.1), (rows, 1))
    )
    idx = packed_index(3, rows).to(DEV)
    ops = torch.ops.rl_kernel_ops
    _, rstd = ops.norm_modulate_fwd(x, w, shift, scale, idx, EPS)
    plan = (*cuda_rows._plan(ops, idx, R), cuda_rows.TILE_ROWS)
    real = int(plan[2][-1])
    for _ in range(2):
        one_dx, one_partials = ops.norm_modulate_bwd(g, x, rstd, w, scale, idx, *plan, variant)
        if variant % 2:
            assert same_bits(one_dx, ops.norm_modulate_bwd_dx(g, x, rstd, w, scale, idx))
        else:
            partials = ops.norm_modulate_bwd_partials(g, x, rstd, w, scale, *plan)[:, :real]
            assert same_bits(one_partials[:, :real], partials)
