"""Kernel fingerprints: which kernels one forward and one backward pass of a candidate ran.

``fingerprint`` profiles one extra evaluation of a candidate, apart from the evaluations that are
compared and timed, with ``torch.profiler``, each phase in its own profiling session:

- on a CUDA device, every device activity the profiler saw in the phase (kernels, and copies and
  fills under the profiler's names for them), by name, with how many times each ran;
- on the CPU, every operator the profiler recorded in the phase (``aten::*`` ops, the autograd
  nodes of the backward such as ``AddBackward0``, and custom ops such as ``_native::*``), by
  name and count; the autograd engine's ``evaluate_function`` wrappers, which only repeat the
  node's name, and user annotations are left out. The counts are those of torch's own event list
  (``prof.events()``), read from the profiler's raw events with the same rules (``_cpu_counts``):
  building that list takes about 50 µs an event, 29 s for the 581,480 operators of the CPU
  oracle's adaln_projection backward at T = 1, against 1.3 s this way.

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


# utility ops torch's profiler leaves out of its event list (``torch.autograd.profiler._filter_name``)
_UTILITY = frozenset(
    {
        "[memory]",
        "[OutOfMemory]",
        "profiler::_record_function_enter",
        "profiler::_record_function_enter_new",
        "profiler::_record_function_exit",
        "aten::is_leaf",
        "aten::output_nr",
        "aten::_version",
    }
)


def _cuda_counts(prof) -> Counts:
    return dict(sorted(Counter(e.name for e in prof.events() if e.device_type == DeviceType.CUDA).items()))


def _cpu_counts(prof) -> Counts:
    """The CPU operators as ``prof.events()`` lists them, from the raw events: utility ops and
    hidden events dropped; an event whose enclosing event on its thread has its name and no other
    child is the same call recorded twice and counted once (torch's ``_remove_dup_nodes``; one pass
    in start order reaches its fixed point, since removing an event only rewires its own children,
    which come later); then user annotations and engine wrappers left out of the counts."""
    kept = [
        e
        for e in prof.profiler.kineto_results.events()
        if e.device_type() == DeviceType.CPU and e.name() not in _UTILITY and not e.is_hidden_event()
    ]
    removed: set[int] = set()
    by_thread: dict[int, list[int]] = {}
    for i, e in enumerate(kept):
        if not e.is_async() and e.start_thread_id() == e.end_thread_id():
            by_thread.setdefault(e.start_thread_id(), []).append(i)
    for members in by_thread.values():
        members.sort(key=lambda i: (kept[i].start_ns(), -kept[i].end_ns()))
        parent: dict[int, int] = {}
        children: dict[int, list[int]] = {}
        open_: list[int] = []
        for i in members:
            while open_ and (
                kept[i].start_ns() >= kept[open_[-1]].end_ns() or kept[i].end_ns() > kept[open_[-1]].end_ns()
            ):
                open_.pop()
            if open_:
                parent[i] = open_[-1]
                children.setdefault(open_[-1], []).append(i)
            open_.append(i)
        for i in members:
            p = parent.get(i)
            if p is None or kept[p].name() != kept[i].name() or len(children[p]) != 1:
                continue
            children[p] = children.pop(i, [])
            for child in children[p]:
                parent[child] = p
            removed.add(i)
    names = [
        e.name()
        for i, e in enumerate(kept)
        if i not in removed and not e.is_user_annotation() and not e.name().startswith(_ENGINE_WRAPPER)
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
        self.found[name] = _cuda_counts(prof) if self.device.type == "cuda" else _cpu_counts(prof)


def fingerprint(
    c: Candidate, op: OpSpec, inputs: dict[str, torch.Tensor], grad_out: torch.Tensor, device: torch.device
) -> Fingerprint:
    """The kernels (CUDA) or operators (CPU) of one evaluation of ``c``: ``{"forward": counts,
    "backward": counts}``, ``backward`` empty when ``c`` differentiates nothing. Raises what the
    profiler or the candidate raises."""
    recorder = _Recorder(device)
    evaluate(c, op, inputs, grad_out, phase=recorder.phase)
    return {"forward": recorder.found["forward"], "backward": recorder.found.get("backward", {})}
