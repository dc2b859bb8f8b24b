"""Kernel fingerprints: which kernels one forward and one backward pass of a candidate ran.

``fingerprint`` profiles one extra evaluation of a candidate, apart from the evaluations that are
compared and timed, with ``torch.profiler``, each phase in its own profiling session:

- on a CUDA device, every device activity the profiler saw in the phase (kernels, and copies and
  fills under the profiler's names for them), by name, with how many times each ran;
- on the CPU, every operator the profiler recorded in the phase (``aten::*`` ops, the autograd
  nodes of the backward such as ``AddBackward0``, and custom ops such as ``_native::*``), by
  name and count; the autograd engine's ``evaluate_function`` wrappers, which only repeat the
  node's name, and user annotations are left out.

The profiled evaluation computes the same thing as the compared ones, with the same inputs; its
results are thrown away, so a report's bits do not depend on whether fingerprints were taken.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator

import torch
from torch.autograd import DeviceType

from audit.core.candidates import Candidate
from audit.core.evaluate import evaluate
from audit.core.ops import OpSpec

Counts = dict[str, int]  # kernel or operator name -> launches
Fingerprint = dict[str, Counts]  # "forward" / "backward" -> counts

_ENGINE_WRAPPER = "autograd::engine::evaluate_function: "


def profiler_problem() -> str | None:
    """Why this process cannot take fingerprints (None when it can)."""
    if not torch.autograd.profiler.kineto_available():
        return "torch was built without the Kineto profiler"
    return None


def _counts(events, device: torch.device) -> Counts:
    if device.type == "cuda":
        names = [e.name for e in events if e.device_type == DeviceType.CUDA]
    else:
        names = [
            e.name
            for e in events
            if e.device_type == DeviceType.CPU and not e.is_user_annotation and not e.name.startswith(_ENGINE_WRAPPER)
        ]
    return dict(sorted(Counter(names).items()))


class _Recorder:
    def __init__(self, device: torch.device):
        self.device = device
        self.found: Fingerprint = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        activities = [torch.profiler.ProfilerActivity.CPU]
        if self.device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
            torch.cuda.synchronize(self.device)  # nothing launched before the phase is counted in it
        with torch.profiler.profile(activities=activities) as prof:
            yield
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
        self.found[name] = _counts(prof.events(), self.device)


def fingerprint(
    c: Candidate, op: OpSpec, inputs: dict[str, torch.Tensor], grad_out: torch.Tensor, device: torch.device
) -> Fingerprint:
    """The kernels (CUDA) or operators (CPU) of one evaluation of ``c``: ``{"forward": counts,
    "backward": counts}``, ``backward`` empty when ``c`` differentiates nothing. Raises what the
    profiler or the candidate raises."""
    recorder = _Recorder(device)
    evaluate(c, op, inputs, grad_out, phase=recorder.phase)
    return {"forward": recorder.found["forward"], "backward": recorder.found.get("backward", {})}
