"""The chain's one-block model as the denoiser of an N-step flow-matching Euler loop, per chain.

Contract:
- The schedule is diffusers' own: ``MiniMaxH3Scheduler`` (``diffusers.schedulers``, the scheduler
  of diffusers' MiniMax-H3 pipeline) with the pipeline's video shift ``SHIFT`` = 12.0, set to
  ``steps + 1`` sigmas (its grid counts the terminal 0), so ``steps`` model evaluations. Each step
  every one of the sequence's timesteps is the schedule's ``t`` (``t = 1 - sigma``, 1 = clean).
- The latent starts as the chain's seeded input (``draw_inputs(...).hidden``) in FP32. Each step the
  block reads it in BF16, the chain (``audit.core.chain.replay``: time path, block, ``norm_out``)
  gives the velocity, and ``MiniMaxH3Scheduler.step`` (FP32) gives the next latent.
- One loop per chain: the provider's (diffusers' stages) and the candidate chain (``resolve``), each
  run ``REPEATS`` times from the same start. Every step's latent of the candidate chain is compared
  bit for bit with the provider's (``audit.core.compare``), with ``repeatable`` false where either
  side's runs gave different bits at that step (a non-repeatable step, never drift); plus the PSNR
  and max|Δ| relative to the provider latent's range (max - min).
- Everything is deterministic for a deterministic provider: same inputs, same weights, same bits.
"""

from __future__ import annotations

import math
import time
from typing import Callable

import torch

from audit.core.chain import (
    MODALITIES,
    REPEATS,
    STAGES,
    BlockConfig,
    Choice,
    Impl,
    StageFailed,
    _compared,
    build_model,
    draw_inputs,
    fall_back,
    make_side,
    replay,
    resolve,
)
from audit.core.inputs import fingerprint

SHIFT = 12.0  # the video schedule's shift in diffusers' MiniMax-H3 pipeline (MiniMaxH3SetTimestepsStep)
SCHEDULE = (
    "diffusers MiniMaxH3Scheduler (the MiniMax-H3 pipeline's), video shift 12.0, steps + 1 sigmas "
    "(terminal 0 included); every row at the step's timestep"
)


def scheduler(steps: int):
    """diffusers' MiniMax-H3 scheduler, set for ``steps`` model evaluations."""
    from diffusers.schedulers import MiniMaxH3Scheduler

    found = MiniMaxH3Scheduler(shift=SHIFT)
    found.set_timesteps(steps + 1)
    return found


def denoise(model, impls: list[Impl], inputs, device: torch.device, steps: int) -> list[torch.Tensor]:
    """The FP32 latent after each step of one loop with the stages ``impls`` (``steps`` tensors)."""
    side = make_side(model, inputs, device, False)
    sched = scheduler(steps)
    latent = inputs.hidden.to(device).float()
    found = []
    for t in sched.timesteps:
        start = {"timestep": t.expand(MODALITIES).to(device), "h0": latent.to(torch.bfloat16)}
        velocity = replay(side, impls, start).values["out"]
        latent = sched.step(velocity.float(), t, latent, return_dict=False)[0]
        found.append(latent)
    return found


def drift(candidate: list[torch.Tensor], provider: list[torch.Tensor]) -> dict:
    """One step: ``candidate[0]`` against ``provider[0]`` bitwise (``repeatable`` from the second
    runs), and ``psnr`` (dB; null when equal) and ``rel_max_abs`` (max|Δ| / (max - min) of the
    provider's latent)."""
    cmp = _compared(candidate, provider)
    a, b = candidate[0].double(), provider[0].double()
    span = float(b.max() - b.min()) or 1.0
    mse = float((a - b).pow(2).mean())
    return {
        "cmp": cmp,
        "psnr": 10 * math.log10(span**2 / mse) if mse > 0 else None,
        "rel_max_abs": float((a - b).abs().max()) / span,
    }


def run_trajectory(
    config: BlockConfig,
    lengths: list[int],
    choices: dict[str, Choice],
    mode: str,
    device: torch.device,
    steps: int,
    emit: Callable[..., None],
) -> None:
    """Per length: the provider's and the candidate chain's loops, each ``REPEATS`` times, compared
    step by step. A candidate that raises makes its stage unavailable (the provider takes its place)
    and the length runs again. Events: ``inputs`` (length, sha256), ``length`` (length, data)."""
    model = build_model(config, device)
    chosen = resolve(choices, mode, device, False)
    timesteps = [float(t) for t in scheduler(steps).timesteps]
    for length in lengths:
        inputs = draw_inputs(config, length)
        emit("inputs", length=length, sha256=fingerprint(inputs.tensors()))
        began = time.perf_counter()
        provider = [denoise(model, [st.provider for st in STAGES], inputs, device, steps) for _ in range(REPEATS)]
        while True:
            try:
                impls = [chosen[st.name].impl for st in STAGES]
                candidate = [denoise(model, impls, inputs, device, steps) for _ in range(REPEATS)]
                break
            except StageFailed as failed:
                fall_back(chosen, failed, "the trajectory")
        data = {
            "wall_s": time.perf_counter() - began,
            "stages": {st.name: chosen[st.name].entry for st in STAGES},
            "steps": [
                {"timestep": t, **drift([c[i] for c in candidate], [p[i] for p in provider])}
                for i, t in enumerate(timesteps)
            ],
        }
        emit("length", length=length, data=data)
