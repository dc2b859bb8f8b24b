"""The bitwise-reuse check, worker side: for each case, every candidate's outputs and gradients
against each reference, bit for bit, on the candidate's device.

References' tensors are kept on disk (safetensors) so that other modes' processes compare with
the very tensors plain mode computed.
"""

from __future__ import annotations

import os
import traceback
from pathlib import Path
from typing import Callable

import torch
from safetensors.torch import load_file, save_file

from .candidates import Candidate, error_text
from .compare import compare
from .evaluate import Result, evaluate
from .inputs import draw_grad_out, draw_inputs, fingerprint
from .ops import OpSpec


def compare_results(op: OpSpec, result: Result, reference: Result) -> dict:
    """The report's per-case entry: every output, and every gradient both sides have."""
    outs, grads = result
    ref_outs, ref_grads = reference
    return {
        "out": [compare(o, r) for o, r in zip(outs, ref_outs)],
        "grads": {n: compare(grads[n], ref_grads[n]) for n in op.grads if n in grads and n in ref_grads},
    }


class ReferenceStore:
    """References' results per case: in memory for this process, on disk for the other modes."""

    def __init__(self, root: Path, device: torch.device):
        self.root, self.device = root, device
        self.local: dict[str, Result] = {}

    def _path(self, case: int, name: str, suffix: str) -> Path:
        return self.root / str(case) / f"{name}.{suffix}"

    def new_case(self) -> None:
        self.local.clear()

    def save(self, case: int, name: str, result: Result) -> None:
        self.local[name] = result
        outs, grads = result
        tensors = {f"out.{i}": o.contiguous().cpu() for i, o in enumerate(outs)}
        tensors |= {f"grad.{n}": g.contiguous().cpu() for n, g in grads.items()}
        path = self._path(case, name, "safetensors")
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file(tensors, str(path) + ".tmp")
        os.replace(str(path) + ".tmp", path)

    def record_failure(self, case: int, name: str, reason: str) -> None:
        path = self._path(case, name, "failed")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(reason)

    def get(self, case: int, name: str) -> Result | str | None:
        """The reference's result, the reason it failed for this case, or None if it never ran."""
        if name in self.local:
            return self.local[name]
        path = self._path(case, name, "safetensors")
        if path.exists():
            tensors = load_file(str(path), device=str(self.device))
            outs = [tensors[k] for k in sorted(k for k in tensors if k.startswith("out."))]
            grads = {k.removeprefix("grad."): v for k, v in tensors.items() if k.startswith("grad.")}
            self.local[name] = (outs, grads)
            return self.local[name]
        failed = self._path(case, name, "failed")
        return failed.read_text() if failed.exists() else None


def run_bitwise(
    job: dict, op: OpSpec, device: torch.device, runnable: list[tuple[str, Candidate]], emit: Callable[..., None]
) -> None:
    """Events: ``drawing`` and ``inputs`` (case fingerprint) per case, ``start``, then ``done`` (with
    ``data``: reference -> comparison) or ``failed`` (with ``reason``) per candidate and case."""
    store = ReferenceStore(Path(job["reference_dir"]), device)
    references, skip = job["references"], {tuple(x) for x in job.get("skip", [])}
    for case in job["units"]:
        if all((name, case) in skip for name, _ in runnable):  # e.g. a case whose drawing killed the last process
            continue
        store.new_case()
        emit("drawing", unit=case)  # a death from here to the first candidate loses this case only
        try:
            cpu_inputs = draw_inputs(op, case, seed=case)
            emit("inputs", case=case, sha256=fingerprint(cpu_inputs))
            inputs = {k: v.to(device) for k, v in cpu_inputs.items()}
            grad_out = draw_grad_out(op, case, seed=case).to(device)
        except Exception as exc:  # e.g. out of memory: every candidate loses this case, not the run
            reason = f"the inputs of case {case} could not be drawn: {error_text(exc)}"
            for name, _ in runnable:
                if (name, case) not in skip:
                    emit("failed", candidate=name, unit=case, reason=reason)
            continue
        del cpu_inputs
        for name, c in runnable:
            if (name, case) in skip:
                continue
            emit("start", candidate=name, unit=case)
            try:
                result = evaluate(c, op, inputs, grad_out)
            except Exception as exc:
                if name in references:
                    store.record_failure(case, name, error_text(exc))
                emit("failed", candidate=name, unit=case, reason=error_text(exc), traceback=traceback.format_exc(limit=4))
                if device.type == "cuda":
                    torch.cuda.empty_cache()
                continue
            is_reference = name in references
            if is_reference:
                store.save(case, name, result)
            vs: dict[str, dict] = {}
            for ref in references:
                if ref == name:
                    continue
                got = store.get(case, ref)
                if isinstance(got, str):
                    vs[ref] = {"unavailable": f"reference {ref} failed for this case: {got}"}
                elif got is not None:
                    vs[ref] = compare_results(op, result, got)
                    if is_reference:  # the earlier reference learns how it compares with this one
                        emit("done", candidate=ref, unit=case, data={name: compare_results(op, got, result)})
            emit("done", candidate=name, unit=case, data=vs)
            del result
        del inputs, grad_out
        if device.type == "cuda":
            torch.cuda.empty_cache()
