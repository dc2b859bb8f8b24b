"""CUDA-backed GEMM ops: autograd Functions over the kernels of ``csrc/timestep_mlp.cu`` and
``csrc/adaln_projection.cu`` (``torch.ops.rl_kernel_ops.gemm_tmlp_*`` / ``adaln_proj_*``).

Same names, signatures and canonical summation order as ``reference_gemm`` (whose split-count
constants are passed to the kernels). Contracts:
- deterministic: the same inputs give the same bits, output and every gradient, run after run;
  no atomics anywhere (weight and bias gradients are fixed-order reductions over the rows);
- batch-invariant: a row's output and its row gradient (dx / d_temb) do not depend on how many
  rows are in the batch or where the row sits (the tile shape follows T, the order of every
  output's terms does not);
- timestep_mlp is FP32 throughout (FFMA, no TF32); adaln_projection computes
  ``silu(temb).to(bf16)`` bitwise as eager CUDA does, then a BF16 tensor-core GEMM with FP32
  accumulation, bias added, one rounding; its d_temb rounds ``dout @ w`` to BF16 first, as eager
  autograd does through ``.to(bf16)``.
adaln_projection has two kernel sets with the same summation order, so the same bits: the wgmma/TMA
kernels of ``csrc/gemm_wgmma_bf16.cuh`` (forward) and ``csrc/gemm_wgmma_bwd_bf16.cuh`` (dgrad and
wgrad) on sm_90 devices whose weight their tiles cover, the mma.sync kernels elsewhere (other GPUs
need them). Every output is one FP32 chain of 16-wide k steps, ascending from 0: the forward over
D; dgrad over ``ADALN_SPLITS_DGRAD`` fixed chunks of N folded in ascending order; wgrad over all T
rows. ``RL_KERNEL_OPS_ADALN_WGMMA=0`` / ``RL_KERNEL_OPS_ADALN_WGMMA_BWD=0`` select mma.sync on an
sm_90 device (for comparisons and benchmarks).
Against eager cuBLAS the results are equal to tolerance, not bitwise (different summation order);
adaln_projection's forward output is the exception: on the H200 it equals cuBLAS's bit for bit at
every T checked (1 to 8192; docs/evidence/h200/check_adaln_wgmma_step*).

Inputs are checked before any kernel runs: wrong dtypes raise TypeError; wrong shapes, devices,
non-contiguous or not 16-byte aligned tensors, and sizes the tiles do not cover raise ValueError.
"""

from __future__ import annotations

import functools
import os

import torch
from torch.autograd.function import once_differentiable

from . import _build
from ._checks import kernel_layout
from .reference_gemm import (
    ADALN_SPLITS_DGRAD,
    ROW_CHUNK,
    TMLP_SPLITS_FC1,
    TMLP_SPLITS_FC1_DGRAD,
    TMLP_SPLITS_FC2,
    TMLP_SPLITS_FC2_DGRAD,
    TMLP_WGRAD_ROWS,
    check_adaln_projection_args,
    check_timestep_mlp_args,
)

TILE = 128  # the kernels' output tiles: every weight dimension must be a multiple of it


def _ops():
    _build.load_extension()
    return torch.ops.rl_kernel_ops


def _check_cuda_layout(dims: dict[str, int], **tensors: torch.Tensor) -> None:
    for name, t in tensors.items():
        if not t.is_cuda:
            raise ValueError(f"{name} must be on a CUDA device, got {t.device}")
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous (strides {t.stride()})")
        if t.data_ptr() % 16:
            raise ValueError(f"{name} must be 16-byte aligned (its data is {t.data_ptr() % 16} bytes off)")
    for name, size in dims.items():
        if size % TILE:
            raise ValueError(f"{name}={size} must be a multiple of {TILE} for the CUDA kernels")


class TimestepMLP(torch.autograd.Function):
    """linear(silu(linear(x, w1, b1)), w2, b2) on the FP32 SIMT kernels; grads for all inputs."""

    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2):
        out, h, a = _ops().gemm_tmlp_forward(x, w1, b1, w2, b2, TMLP_SPLITS_FC1, TMLP_SPLITS_FC2)
        ctx.save_for_backward(x, w1, w2, h, a)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, dout):
        x, w1, w2, h, a = ctx.saved_tensors
        needs = ctx.needs_input_grad
        splits = (TMLP_SPLITS_FC2_DGRAD, TMLP_SPLITS_FC1_DGRAD, ROW_CHUNK, TMLP_WGRAD_ROWS)
        grads = _ops().gemm_tmlp_backward(kernel_layout(dout.float()), x, w1, w2, h, a, *splits, *needs)
        return tuple(g if need else None for g, need in zip(grads, needs))


WGMMA_N, WGMMA_D = 256, 64  # the wgmma forward's tile width and k slice


@functools.cache
def _capability(device: torch.device) -> tuple[int, int]:
    """The compute capability of a CUDA device, read once (it is on every call's path)."""
    return torch.cuda.get_device_capability(device)


def adaln_forward_kernel(w: torch.Tensor) -> str:
    """Which forward kernel adaln_projection runs for weight ``w``: "wgmma" (sm_90, N % 256 == 0,
    D % 64 == 0, unless RL_KERNEL_OPS_ADALN_WGMMA=0) or "mma"."""
    if os.environ.get("RL_KERNEL_OPS_ADALN_WGMMA", "1") == "0":
        return "mma"
    n, d = w.shape
    if _capability(w.device) == (9, 0) and n % WGMMA_N == 0 and d % WGMMA_D == 0:
        return "wgmma"
    return "mma"


def adaln_backward_kernel(w: torch.Tensor, splits: int = ADALN_SPLITS_DGRAD) -> str:
    """Which backward GEMM kernels adaln_projection runs for weight ``w`` with dgrad in ``splits``
    chunks: "wgmma" (sm_90, D % 128 == 0, N % (64 * splits) == 0, unless
    RL_KERNEL_OPS_ADALN_WGMMA_BWD=0) or "mma"."""
    if os.environ.get("RL_KERNEL_OPS_ADALN_WGMMA_BWD", "1") == "0":
        return "mma"
    n, d = w.shape
    if _capability(w.device) == (9, 0) and d % 128 == 0 and n % (64 * splits) == 0:
        return "wgmma"
    return "mma"


def _adaln_forward(temb, w, b) -> tuple[torch.Tensor, torch.Tensor]:
    """The forward kernel's (out, a = silu(temb).to(bf16)), with or without autograd around it."""
    ops = _ops()
    if adaln_forward_kernel(w) == "wgmma":
        # RL_KERNEL_OPS_ADALN_WGMMA_VARIANT forces one of the wgmma kernels (1..4, same bits) for
        # benchmarks; 0 (default) lets the kernel choose by T.
        variant = int(os.environ.get("RL_KERNEL_OPS_ADALN_WGMMA_VARIANT", "0"))
        return ops.adaln_proj_forward_wgmma(temb, w, b, variant)
    return ops.adaln_proj_forward(temb, w, b)


class AdalnProjection(torch.autograd.Function):
    """linear(silu(temb).to(bf16), w, b) on the BF16 tensor-core kernels; grads temb, w, b."""

    @staticmethod
    def forward(ctx, temb, w, b):
        out, a = _adaln_forward(temb, w, b)
        ctx.save_for_backward(temb, a, w)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, dout):
        temb, a, w = ctx.saved_tensors
        needs = ctx.needs_input_grad
        args = (kernel_layout(dout.to(torch.bfloat16)), temb, a, w, ADALN_SPLITS_DGRAD, ROW_CHUNK, *needs)
        if adaln_backward_kernel(w) == "wgmma":
            # RL_KERNEL_OPS_ADALN_WGMMA_BWD_VARIANT forces dgrad's tile (1..3) for benchmarks.
            variant = int(os.environ.get("RL_KERNEL_OPS_ADALN_WGMMA_BWD_VARIANT", "0"))
            grads = _ops().adaln_proj_backward_wgmma(*args, variant)
        else:
            grads = _ops().adaln_proj_backward(*args)
        return tuple(g if need else None for g, need in zip(grads, needs))


def adaln_dgrad_partials(dout: torch.Tensor, w: torch.Tensor, splits: int) -> torch.Tensor:
    """(splits, T, D) FP32: the backward's dgrad chains over ``splits`` equal chunks of N's rows,
    not folded (``reference_gemm.adaln_dgrad_partials``), on the kernels ``adaln_backward_kernel``
    picks for them: the same chains, the same bits."""
    dout = kernel_layout(dout.to(torch.bfloat16))
    if adaln_backward_kernel(w, splits) == "wgmma":
        return _ops().adaln_proj_dgrad_part_wgmma(dout, w, splits)
    return _ops().adaln_proj_dgrad_part(dout, w, splits)


def adaln_fold_dgrad(part: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
    """d_temb from the chunk partials, by the backward's own fold kernel."""
    return _ops().adaln_proj_fold_dgrad(kernel_layout(part), temb)


def timestep_mlp(x, w1, b1, w2, b2):
    """x (T, F), w1 (Hd, F), b1 (Hd,), w2 (D, Hd), b2 (D,): FP32 CUDA tensors, F, Hd, D % 128 == 0."""
    check_timestep_mlp_args(x, w1, b1, w2, b2)
    _check_cuda_layout({"F": w1.shape[1], "Hd": w1.shape[0], "D": w2.shape[0]}, x=x, w1=w1, b1=b1, w2=w2, b2=b2)
    return TimestepMLP.apply(x, w1, b1, w2, b2)


def adaln_projection(temb, w, b):
    """temb (T, D) FP32, w (N, D) BF16, b (N,) BF16 CUDA tensors, D and N multiples of 128.
    Where no gradient can be asked for (grad mode off, or no input requiring one: a rollout's
    forward) the kernel is called without the autograd Function around it: the same kernel, the
    same bits, less host time per call."""
    check_adaln_projection_args(temb, w, b)
    _check_cuda_layout({"D": w.shape[1], "N": w.shape[0]}, temb=temb, w=w, b=b)
    if torch.is_grad_enabled() and (temb.requires_grad or w.requires_grad or b.requires_grad):
        return AdalnProjection.apply(temb, w, b)
    return _adaln_forward(temb, w, b)[0]
