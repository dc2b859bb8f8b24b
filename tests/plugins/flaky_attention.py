"""Test double for a non-repeatable attention backward (loaded through $AUDIT_PLUGINS in the
worker): ``torch.nn.functional.scaled_dot_product_attention``, which diffusers' native attention
backend calls, replaced by itself followed by a step whose backward adds one ULP to a different
element of the incoming gradient on each call, as a backward that accumulates in a varying order
would. The forward is unchanged, bit for bit."""

import itertools

import torch

_calls = itertools.count()
_sdpa = torch.nn.functional.scaled_dot_product_attention


class _FlakyGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, out):
        return out.view_as(out)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.clone(memory_format=torch.contiguous_format)
        flat = grad.view(-1).view(torch.int16)  # bf16 bits
        flat[next(_calls) % flat.numel()] += 1
        return grad


def _flaky_sdpa(*args, **kwargs):
    return _FlakyGrad.apply(_sdpa(*args, **kwargs))


torch.nn.functional.scaled_dot_product_attention = _flaky_sdpa
