"""The bitwise-reuse check, worker side: for each case, every candidate's outputs and gradients
against each reference, bit for bit, on the candidate's device.

With ``repeats`` N > 1 every candidate, references included, computes each case N times from the
same inputs and the same upstream gradient; a tensor is repeatable when all N runs gave the same
bits. A comparison is repeatable only when both sides are, so a non-repeatable difference (a
nondeterministic kernel) is told apart from a stable one.

With ``kernels`` on, every candidate that computed a case evaluates it once more under the
profiler (``audit.core.kernels``), after the compared evaluations and apart from them, and sends
the kernels it ran (``Kernels``) before its comparisons (``Done``).

References' tensors, and how repeatable they were, are kept on disk (safetensors and JSON) so that
other modes' processes compare with the very tensors plain mode computed.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from modes import Mode

from audit.core.candidates import Candidate
from audit.core.compare import compare, count_differ
from audit.core.contention import contention
from audit.core.events import Done, Drawing, Emit, Failed, Inputs, Job, Kernels, Start
from audit.core.evaluate import Result, evaluate
from audit.core.inputs import draw_grad_out, draw_inputs, fingerprint
from audit.core.kernels import fingerprint as kernel_fingerprint
from audit.core.kernels import profiler_problem
from audit.core.ops import OpSpec
from audit.core.packages import error_text
from audit.core.timing import phase
from audit.worker import await_turn


Repeats = dict[str, int]  # tensor key ("out.0", "grad.x") -> most elements differing between two runs


def tensors_of(result: Result) -> dict[str, torch.Tensor]:
    """A result's tensors by key: ``out.<i>`` for outputs, ``grad.<input>`` for gradients."""
    outs, grads = result
    return {f"out.{i}": o for i, o in enumerate(outs)} | {f"grad.{n}": g for n, g in grads.items()}


def evaluate_repeated(
    c: Candidate,
    op: OpSpec,
    inputs: dict[str, torch.Tensor],
    grad_out: torch.Tensor,
    repeats: int,
    loaded: torch.device | None = None,
) -> tuple[Result, Repeats | None]:
    """The first of ``repeats`` evaluations, and per tensor the most elements that differed from it
    in a later one (None when ``repeats`` is 1: not checked). With ``loaded`` (a CUDA device), the
    first evaluation runs on a quiet device and every later one under ``contention``, so a result
    that depends on scheduling is not repeatable."""
    first = evaluate(c, op, inputs, grad_out)
    if repeats < 2:
        return first, None
    reference = tensors_of(first)
    worst = dict.fromkeys(reference, 0)
    with contention(loaded) if loaded is not None else contextlib.nullcontext():
        for _ in range(repeats - 1):
            record_repeat(worst, reference, tensors_of(evaluate(c, op, inputs, grad_out)))
    return first, worst


def record_repeat(worst: Repeats, first: dict[str, torch.Tensor], again: dict[str, torch.Tensor]) -> None:
    """Raise each ``worst[key]`` to the elements of ``again[key]`` whose bits differ from ``first[key]``
    (every element when a later run lacks the tensor)."""
    for key, t in first.items():
        worst[key] = max(worst[key], count_differ(again[key], t) if key in again else t.numel())


def with_repeatability(cmp: dict, key: str, mine: Repeats | None, theirs: Repeats | None) -> dict:
    """``cmp`` with ``repeatable`` (and ``repeat_differ``) when both sides' repeats of ``key`` are
    known: repeatable only when neither side's runs differed."""
    if mine is None or theirs is None or key not in mine or key not in theirs:
        return cmp
    worst = max(mine[key], theirs[key])
    return cmp | ({"repeatable": True} if worst == 0 else {"repeatable": False, "repeat_differ": worst})


def compare_results(
    op: OpSpec,
    result: Result,
    reference: Result,
    repeats: Repeats | None = None,
    reference_repeats: Repeats | None = None,
) -> dict:
    """The report's per-case entry: every output, and every gradient both sides have; with both
    sides' repeatability known, each comparison says whether it is repeatable."""
    outs, grads = result
    ref_outs, ref_grads = reference

    def one(key: str, a: torch.Tensor, b: torch.Tensor) -> dict:
        return with_repeatability(compare(a, b), key, repeats, reference_repeats)

    return {
        "out": [one(f"out.{i}", o, r) for i, (o, r) in enumerate(zip(outs, ref_outs))],
        "grads": {n: one(f"grad.{n}", grads[n], ref_grads[n]) for n in op.grads if n in grads and n in ref_grads},
    }


Evaluated = tuple[Result, Repeats | None]


class ReferenceStore:
    """References' results per case, with their repeatability: in memory for this process, on disk
    for the other modes."""

    def __init__(self, root: Path, device: torch.device, references: list[str]):
        self.root, self.device, self.references = root, device, references
        self.local: dict[str, Evaluated] = {}

    def _path(self, case: int, name: str, suffix: str) -> Path:
        return self.root / str(case) / f"{name}.{suffix}"

    def new_case(self) -> None:
        self.local.clear()

    def save(self, case: int, name: str, evaluated: Evaluated) -> None:
        self.local[name] = evaluated
        result, repeats = evaluated
        tensors = {k: t.contiguous().cpu() for k, t in tensors_of(result).items()}
        path = self._path(case, name, "safetensors")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._path(case, name, "repeats.json").write_text(json.dumps(repeats))
        save_file(tensors, str(path) + ".tmp")
        os.replace(str(path) + ".tmp", path)

    def record_failure(self, case: int, name: str, reason: str) -> None:
        path = self._path(case, name, "failed")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(reason)

    def get(self, case: int, name: str) -> Evaluated | str | None:
        """The reference's result and repeatability, the reason it failed for this case, or None
        if it never ran."""
        if name in self.local:
            return self.local[name]
        path = self._path(case, name, "safetensors")
        if path.exists():
            tensors = load_file(str(path), device=str(self.device))
            outs = [tensors[k] for k in sorted((k for k in tensors if k.startswith("out.")), key=lambda k: int(k[4:]))]
            grads = {k.removeprefix("grad."): v for k, v in tensors.items() if k.startswith("grad.")}
            repeats = json.loads(self._path(case, name, "repeats.json").read_text())
            self.local[name] = ((outs, grads), repeats)
            return self.local[name]
        failed = self._path(case, name, "failed")
        return failed.read_text() if failed.exists() else None


def _against_references(
    op: OpSpec, store: ReferenceStore, *, case: int, name: str, evaluated: Evaluated, emit: Emit
) -> dict[str, dict]:
    """``name``'s comparisons with every reference computed so far in this case (and, when ``name``
    is a reference, it is stored, and each earlier reference is sent its comparison with it)."""
    result, reps = evaluated
    is_reference = name in store.references
    if is_reference:
        with phase("writing"):
            store.save(case, name, evaluated)
    vs: dict[str, dict] = {}
    for ref in store.references:
        if ref == name:
            continue
        got = store.get(case, ref)
        if isinstance(got, str):
            vs[ref] = {"unavailable": f"reference {ref} failed for this case: {got}"}
        elif got is not None:
            ref_result, ref_reps = got
            vs[ref] = compare_results(op, result, ref_result, reps, ref_reps)
            if is_reference:  # the earlier reference learns how it compares with this one
                back = vs[ref] if _symmetric(vs[ref]) else compare_results(op, ref_result, result, ref_reps, reps)
                emit(Done(ref, case, {name: back}))
    return vs


def _symmetric(entry: dict) -> bool:
    """Whether ``compare_results(b, a)`` is ``entry``, ``compare_results(a, b)``: every field of a
    comparison is the same both ways (counts, |a - b|, where, ULP distances, repeatability) except
    the wording of an ``error`` (mismatched shapes or dtypes), which names the two sides in order."""
    return not any("error" in c for c in [*entry["out"], *entry["grads"].values()])


def kernels_of(
    c: Candidate, op: OpSpec, inputs: dict[str, torch.Tensor], grad_out: torch.Tensor, device: torch.device
) -> dict:
    """``c``'s kernel fingerprint on these inputs, or ``{"unavailable": why}`` when the profiler is
    missing or the profiled evaluation raised."""
    problem = profiler_problem()
    if problem is None:
        try:
            return kernel_fingerprint(c, op, inputs, grad_out, device)
        except Exception as exc:
            problem = f"the profiled evaluation failed: {error_text(exc)}"
    return {"unavailable": f"no kernel fingerprint: {problem}"}


def run_bitwise(
    job: Job, op: OpSpec, mode: Mode, device: torch.device, runnable: list[tuple[str, Candidate]], emit: Emit
) -> None:
    """Events: ``Drawing`` and ``Inputs`` (the case's fingerprint) per case, ``Start``, then per
    candidate and case ``Kernels`` (with ``job.kernels``) and ``Done`` (``data``: reference ->
    comparison), or ``Failed``. The first case's inputs are drawn before the worker's turn."""
    store = ReferenceStore(Path(job.reference_dir), device, job.references)
    references, skip, repeats = job.references, {tuple(x) for x in job.skip}, job.repeats
    shared: dict = {}  # the inputs every case has in common, drawn once
    for case in job.units:
        if all((name, case) in skip for name, _ in runnable):  # e.g. a case whose drawing killed the last process
            continue
        store.new_case()
        emit(Drawing(case))  # a death from here to the first candidate loses this case only
        try:
            with phase("inputs"):
                cpu_inputs = draw_inputs(op, case, seed=case, shared=shared)
                emit(Inputs(case, fingerprint(cpu_inputs)))
                cpu_grad_out = draw_grad_out(op, case, seed=case)
                if await_turn(emit):
                    emit(Drawing(case))  # the inputs move to the device: a death loses this case again
                inputs = {k: v.to(device) for k, v in cpu_inputs.items()}
                grad_out = cpu_grad_out.to(device)
        except Exception as exc:  # e.g. out of memory: every candidate loses this case, not the run
            reason = f"the inputs of case {case} could not be drawn: {error_text(exc)}"
            for name, _ in runnable:
                if (name, case) not in skip:
                    emit(Failed(name, case, reason))
            continue
        del cpu_inputs, cpu_grad_out
        for name, c in runnable:
            if (name, case) in skip:
                continue
            emit(Start(name, case))
            if c.accepts is not None and (why := c.accepts(inputs, device)) is not None:
                if name in references:
                    store.record_failure(case, name, f"refuses these shapes: {why}")
                emit(Failed(name, case, f"refuses these shapes: {why}"))
                continue
            try:
                with phase("compute"):
                    result, reps = evaluate_repeated(
                        c, op, inputs, grad_out, repeats, loaded=device if job.contention else None
                    )
            except Exception as exc:
                if name in references:
                    store.record_failure(case, name, error_text(exc))
                emit(Failed(name, case, error_text(exc)))
                if device.type == "cuda":
                    torch.cuda.empty_cache()
                continue
            if job.kernels:
                with phase("kernels"):
                    found = kernels_of(c, op, inputs, grad_out, device)
                emit(Kernels(name, case, found))
            with phase("comparison"):
                vs = _against_references(op, store, case=case, name=name, evaluated=(result, reps), emit=emit)
            emit(Done(name, case, vs))
            del result, reps
        del inputs, grad_out
        if device.type == "cuda":
            torch.cuda.empty_cache()
