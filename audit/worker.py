"""The mode subprocess: runs one op's candidates under one mode and reports what it finds.

Started by the runner as ``python -m audit.worker JOB.json`` with the mode's environment already
set, so the mode's variables are in place before torch initialises CUDA. It switches the mode on,
then for each case draws the inputs (identical in every process), runs each candidate, does the
backward pass with the case's fixed upstream gradient, and compares outputs and gradients with
each reference bitwise on the candidate's device. References computed in plain mode are kept on
disk (safetensors) so other modes' processes compare against the same tensors. Everything it
learns goes to the runner as JSON lines on the file descriptor named in the job; a candidate that
raises only loses that case, and a crash of the whole process is handled by the runner.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from modes import get_mode

from .candidates import Candidate, get_candidate, unavailable_reason
from .compare import compare
from .inputs import draw_grad_out, draw_inputs, fingerprint
from .ops import OpSpec, get_op

Result = tuple[list[torch.Tensor], dict[str, torch.Tensor]]


def evaluate(c: Candidate, op: OpSpec, inputs: dict[str, torch.Tensor], grad_out: torch.Tensor) -> Result:
    """Outputs of ``c`` and its gradients w.r.t. the inputs it differentiates, for upstream ``grad_out``.
    Each call gets fresh leaf copies of the inputs, so a candidate cannot disturb another's."""
    wanted = op.grads if c.grads is None else c.grads
    leaves = {n: t.detach().clone().requires_grad_(n in wanted) for n, t in inputs.items()}
    with torch.set_grad_enabled(bool(wanted)):
        out = c.forward(leaves)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    grads: dict[str, torch.Tensor] = {}
    if wanted:
        got = torch.autograd.grad(outs[0], [leaves[n] for n in wanted], grad_outputs=grad_out, allow_unused=True)
        for name, g in zip(wanted, got):
            if g is None:
                raise RuntimeError(f"output does not depend on input {name!r}, which the candidate declares differentiable")
            grads[name] = g
    return [o.detach() for o in outs], grads


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


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip()


def main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    events = os.fdopen(job["events_fd"], "w", buffering=1)

    def emit(event: str, **fields) -> None:
        events.write(json.dumps({"event": event, **fields}) + "\n")

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    op, mode, device = get_op(job["op"]), get_mode(job["mode"]), torch.device(job["device"])
    try:
        description = mode.call("enable")
        tf32 = torch.backends.cuda.matmul.allow_tf32 or torch.backends.cudnn.allow_tf32
        emit("mode", description=description, tf32=tf32)
    except Exception as exc:
        emit("mode_unavailable", reason=f"mode {mode.name} cannot be switched on: {_reason(exc)}")
        return 0

    runnable: list[tuple[str, Candidate]] = []
    for name in job["candidates"]:
        c = get_candidate(op.name, name)
        report_name = c.report_name(mode.name)
        reason = unavailable_reason(c, device)
        if reason:
            emit("unavailable", candidate=report_name, reason=reason)
            continue
        try:
            emit("source", candidate=report_name, source=c.source(mode.name, device))
        except Exception as exc:
            emit("unavailable", candidate=report_name, reason=f"source: {_reason(exc)}")
            continue
        runnable.append((report_name, c))

    store = ReferenceStore(Path(job["reference_dir"]), device)
    references, skip = job["references"], {tuple(x) for x in job.get("skip", [])}
    for case in job["cases"]:
        store.new_case()
        cpu_inputs = draw_inputs(op, case, seed=case)
        emit("inputs", case=case, sha256=fingerprint(cpu_inputs))
        inputs = {k: v.to(device) for k, v in cpu_inputs.items()}
        grad_out = draw_grad_out(op, case, seed=case).to(device)
        del cpu_inputs
        for report_name, c in runnable:
            if (report_name, case) in skip:
                continue
            emit("start", candidate=report_name, case=case)
            try:
                result = evaluate(c, op, inputs, grad_out)
            except Exception as exc:
                reason = _reason(exc)
                if report_name in references:
                    store.record_failure(case, report_name, reason)
                emit("case_failed", candidate=report_name, case=case, reason=reason,
                     traceback=traceback.format_exc(limit=4))
                if device.type == "cuda":
                    torch.cuda.empty_cache()
                continue
            is_reference = report_name in references
            if is_reference:
                store.save(case, report_name, result)
            vs: dict[str, dict] = {}
            for ref in references:
                if ref == report_name:
                    continue
                got = store.get(case, ref)
                if isinstance(got, str):
                    vs[ref] = {"unavailable": f"reference {ref} failed for this case: {got}"}
                elif got is not None:
                    vs[ref] = compare_results(op, result, got)
                    if is_reference:  # the earlier reference learns how it compares with this one
                        emit("done", candidate=ref, case=case, vs={report_name: compare_results(op, got, result)})
            emit("done", candidate=report_name, case=case, vs=vs)
            del result
        del inputs, grad_out
        if device.type == "cuda":
            torch.cuda.empty_cache()
    emit("finished")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
