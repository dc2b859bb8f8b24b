"""GPU tests of rl_kernel_ops' timestep_sinusoid kernel (csrc/timestep_sinusoid.cu): bitwise equal to
diffusers' get_timestep_embedding (flip_sin_to_cos, shift 0) evaluated by eager torch on the same
GPU, for H3's timesteps in [0, 1) and for the [0, 1000) range of other schedulers; each row alone
gives its bits inside any batch; repeated calls give the same bits."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.cuda

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from diffusers.models.embeddings import get_timestep_embedding  # noqa: E402

import rl_kernel_ops  # noqa: E402


def _timesteps(rows: int, scale: float) -> torch.Tensor:
    return (torch.rand(rows, generator=torch.Generator().manual_seed(rows)) * scale).cuda()


@pytest.mark.parametrize("scale", [1.0, 1000.0])
@pytest.mark.parametrize("rows", [1, 3, 64, 2048, 65536])
def test_bitwise_eager_diffusers_on_the_same_gpu(rows, scale):
    t = _timesteps(rows, scale)
    eager = get_timestep_embedding(t, 256, flip_sin_to_cos=True, downscale_freq_shift=0)
    ours = rl_kernel_ops.timestep_sinusoid(t)
    assert ours.dtype == torch.float32 and ours.shape == (rows, 256)
    differ = (ours.view(torch.int32) != eager.view(torch.int32)).sum().item()
    assert differ == 0, f"{differ} of {ours.numel()} elements differ"


def test_batch_invariant_and_repeatable():
    t = _timesteps(2048, 1000.0)
    full = rl_kernel_ops.timestep_sinusoid(t)
    assert torch.equal(full.view(torch.int32), rl_kernel_ops.timestep_sinusoid(t).view(torch.int32))
    for start, size in [(0, 1), (5, 1), (7, 33), (1024, 1024), (2047, 1)]:
        part = rl_kernel_ops.timestep_sinusoid(t[start : start + size].contiguous())
        assert torch.equal(part.view(torch.int32), full[start : start + size].view(torch.int32))
