"""The prior-art checks, worker side: is a candidate batch-invariant under a mode, are its
parameter gradients repeatable, and how accurate and fast is it?

Every check is bitwise. "Alone" means the row computed in a batch of one; a row differs when its
output row or any of its row-input gradient rows has different bits. The Python overhead is kept
small (per-row verdicts stay on the device until the end of a check), but every row that the
definition says is computed alone is computed alone.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from typing import Callable

import torch

from modes import Mode

from audit.core.candidates import Candidate, from_report_name, get_candidate

from audit.core.packages import error_text
from audit.core.compare import bit_patterns
from audit.core.contention import contention
from audit.core.evaluate import Result, differentiated, evaluate
from audit.core.events import Done, Emit, Failed, Job, Start
from audit.core.inputs import draw_grad_out, draw_input
from audit.core.ops import OpSpec
from audit.core.timing import phase
from audit.worker import await_turn
from audit.core.prior_art_sizes import (
    CHECKS,
    Sizes,
    positions,
    probe_rows,
    sizes_from_json,
    sub_batch_starts,
    sweep_sizes,
)

MAX_FAILURES = 8


def take_rows(t: torch.Tensor, index: torch.Tensor | slice) -> torch.Tensor:
    """Rows of ``t``: a contiguous range (a view) or gathered by an index tensor."""
    return t[index] if isinstance(index, slice) else t.index_select(0, index)


class Checker:
    """Runs one candidate's checks on one device."""

    def __init__(
        self, c: Candidate, op: OpSpec, mode: Mode, device: torch.device, sizes: Sizes, input_cache: dict | None = None
    ):
        self.c, self.op, self.mode, self.device, self.sizes = c, op, mode, device, sizes
        self.input_cache = {} if input_cache is None else input_cache  # (rows, seed) -> inputs, shared by candidates
        wanted = differentiated(c, op)
        self.row_grads = tuple(n for n in wanted if op.input(n).rows)
        self.param_grads = tuple(n for n in wanted if not op.input(n).rows)

    # -- helpers ---------------------------------------------------------------------------
    def case_inputs(self, rows: int, seed: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """The op's inputs for ``rows`` rows and ``seed`` on the device, and the upstream gradient.
        Drawing on the CPU dominates for large batches, so each case is drawn once per process
        and shared by the candidates (they get leaf copies of what they differentiate)."""
        key = (rows, seed)
        if key in self.input_cache:
            return self.input_cache[key]
        with phase("inputs"):
            params = self.input_cache.get("params")
            if params is None:
                params = {s.name: draw_input(s, 1, seed).to(self.device) for s in self.op.inputs if not s.rows}
                self.input_cache["params"] = params
            inputs = {
                s.name: params[s.name] if not s.rows else draw_input(s, rows, seed).to(self.device)
                for s in self.op.inputs
            }
            self.input_cache[key] = (inputs, draw_grad_out(self.op, rows, seed).to(self.device))
            return self.input_cache[key]

    def rows(self, inputs: dict[str, torch.Tensor], index: torch.Tensor | slice) -> dict[str, torch.Tensor]:
        """The same inputs restricted to some rows: row inputs indexed, parameters shared."""
        return {k: take_rows(v, index) if self.op.input(k).rows else v for k, v in inputs.items()}

    def run(self, inputs: dict[str, torch.Tensor], grad_out: torch.Tensor, params: bool = False) -> Result:
        only = self.row_grads + (self.param_grads if params else ())
        return evaluate(self.c, self.op, inputs, grad_out, only=only, copy_all=False)

    def row_differs(self, got: Result, want: Result) -> tuple[torch.Tensor, torch.Tensor]:
        """Per row of ``got``: (output differs, some row gradient differs), as device booleans."""

        def per_row(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return (bit_patterns(a) != bit_patterns(b)).reshape(a.shape[0], -1).any(dim=1)

        with phase("comparison"):
            fwd = per_row(got[0][0], want[0][0])
            grad = torch.zeros_like(fwd)
            for n in self.row_grads:
                grad |= per_row(got[1][n], want[1][n])
            return fwd, grad

    @staticmethod
    def sliced(result: Result, index: torch.Tensor | slice) -> Result:
        return [take_rows(o, index) for o in result[0]], {k: take_rows(v, index) for k, v in result[1].items()}

    # -- the checks --------------------------------------------------------------------------
    def all_rows(self) -> dict:
        out = {}
        for n in self.sizes.all_rows:
            fwd_bad = grad_bad = 0
            for seed in self.sizes.seeds:
                inputs, g = self.case_inputs(n, seed)
                full = self.run(inputs, g)
                flags = [
                    self.row_differs(
                        self.run(self.rows(inputs, slice(i, i + 1)), g[i : i + 1]), self.sliced(full, slice(i, i + 1))
                    )
                    for i in range(n)
                ]
                fwd_bad += int(torch.cat([f for f, _ in flags]).sum())
                grad_bad += int(torch.cat([r for _, r in flags]).sum())
            out[str(n)] = {"rows": n * len(self.sizes.seeds), "fwd_differ": fwd_bad, "rowgrad_differ": grad_bad}
        return out

    def params_repeatable(self) -> bool:
        n = max(self.sizes.all_rows)
        for seed in self.sizes.seeds:
            inputs, g = self.case_inputs(n, seed)
            first, again = self.run(inputs, g, params=True), self.run(inputs, g, params=True)
            for name in self.param_grads:
                if not torch.equal(bit_patterns(first[1][name]), bit_patterns(again[1][name])):
                    return False
        return True

    def full_vs_sub_batches(self) -> dict:
        full_n, sizes = self.sizes.full_batch, self.sizes.sub_batch_sizes
        count = fwd_bad = grad_bad = 0
        for seed in self.sizes.sub_seeds:
            inputs, g = self.case_inputs(full_n, seed)
            full = self.run(inputs, g)
            flags = []
            for size in sizes:
                for start in sub_batch_starts(full_n, size):
                    part = slice(start, start + size)
                    fwd, grad = self.row_differs(self.run(self.rows(inputs, part), g[part]), self.sliced(full, part))
                    flags.append(torch.stack([fwd.any(), grad.any()]))
            count += len(flags)
            if flags:
                totals = torch.stack(flags).sum(dim=0).tolist()
                fwd_bad, grad_bad = fwd_bad + totals[0], grad_bad + totals[1]
            del inputs, g, full
        return {
            "full_batch": full_n,
            "sub_batch_sizes": list(sizes),
            "sub_batches": count,
            "fwd_differ": int(fwd_bad),
            "rowgrad_differ": int(grad_bad),
        }

    def batch_size_sweep(self) -> dict:
        n = self.sizes.sweep_rows
        sizes, probes = sweep_sizes(n), probe_rows(n)
        comparisons, failures, differ = 0, [], 0
        for seed in self.sizes.seeds:
            inputs, g = self.case_inputs(n, seed)
            cases: list[tuple[int, int, int, torch.Tensor]] = []  # (batch, position, probe, differs)
            for p in probes:
                alone = self.run(self.rows(inputs, slice(p, p + 1)), g[p : p + 1])
                others = torch.tensor([r for r in range(n) if r != p])
                gen = torch.Generator().manual_seed(seed * 100_003 + p)
                shuffled = others[torch.randperm(n - 1, generator=gen)]
                batches = [
                    (m, pos, torch.cat([shuffled[:pos], torch.tensor([p]), shuffled[pos : m - 1]]))
                    for m in sizes
                    for pos in positions(m)
                ]
                batches.append((n, n - 1 - p, torch.arange(n - 1, -1, -1)))  # the whole batch reversed
                for m, pos, order in batches:
                    order = order.to(self.device)
                    got = self.run(self.rows(inputs, order), g.index_select(0, order))
                    fwd, grad = self.row_differs(self.sliced(got, slice(pos, pos + 1)), alone)
                    cases.append((m, pos, p, fwd | grad))
            verdicts = torch.cat([d for *_, d in cases]).tolist()
            comparisons += len(cases)
            for (m, pos, p, _), bad in zip(cases, verdicts):
                if bad:
                    differ += 1
                    if len(failures) < MAX_FAILURES:
                        failures.append({"seed": seed, "batch": m, "position": pos, "row": p})
        return {
            "batch_sizes": sizes,
            "probe_rows": probes,
            "comparisons": comparisons,
            "differ": differ,
            "first_failures": failures,
        }

    @contextlib.contextmanager
    def mode_off(self):
        """The mode switched off where the library can do that (the FP64 reference needs it)."""
        if self.mode.disable is None:
            yield
            return
        self.mode.call("disable")
        try:
            yield
        finally:
            self.mode.call("enable")

    def accuracy_latency(self) -> dict:
        if self.c.computes:
            reference = get_candidate(self.op.name, self.c.computes)
        else:
            reference, _ = from_report_name(self.op.name, self.op.references[0])
        out = {}
        for size in self.sizes.accuracy:
            inputs, g = self.case_inputs(size, seed=size)
            got = evaluate(self.c, self.op, inputs, g)
            wide = {k: v.double() if v.is_floating_point() else v for k, v in inputs.items()}
            with self.mode_off():
                want = evaluate(reference, self.op, wide, g.double())
            out[str(size)] = {
                "fwd_rel_err": rel_err(got[0][0], want[0][0]),
                "grad_rel_err": {n: rel_err(got[1][n], want[1][n]) for n in got[1] if n in want[1]},
                **self.latency(inputs, g),
            }
            del inputs, g, got, want, wide
        return out

    def latency(self, inputs: dict[str, torch.Tensor], g: torch.Tensor) -> dict:
        wanted = differentiated(self.c, self.op)
        leaves = {n: t.detach().clone().requires_grad_(n in wanted) for n, t in inputs.items()}
        targets = [leaves[n] for n in wanted]

        def forward():
            with torch.set_grad_enabled(bool(wanted)):
                return self.c.forward(leaves)

        def forward_backward():
            out = forward()
            if targets:
                torch.autograd.grad(out, targets, grad_outputs=g)

        return {
            "fwd_us": median_us(forward, self.device, self.sizes),
            "fwd_bwd_us": median_us(forward_backward, self.device, self.sizes),
        }


def rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    """max |got - want| / max |want|, in float64."""
    want = want.double()
    scale = float(want.abs().max()) if want.numel() else 0.0
    err = float((got.double() - want).abs().max()) if want.numel() else 0.0
    return err / scale if scale else err


def median_us(fn: Callable[[], object], device: torch.device, sizes: Sizes) -> float:
    """Median of ``samples`` timings after ``warmup`` calls: CUDA events on a GPU, a wall clock otherwise."""
    for _ in range(sizes.warmup):
        fn()
    if device.type == "cuda":
        pairs = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(sizes.samples)
        ]
        torch.cuda.synchronize(device)
        for start, end in pairs:
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize(device)
        times = [start.elapsed_time(end) * 1000.0 for start, end in pairs]
    else:
        times = []
        for _ in range(sizes.samples):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def check_candidate(checker: Checker, on_step: Callable[[str, dict], None], loaded: bool = False) -> dict:
    """Run the checks in order; ``on_step(check, result_so_far)`` after each. With ``loaded``, the
    batch-invariance checks run under ``contention`` on the checker's (CUDA) device; accuracy and
    latency never do."""
    bi: dict = {}
    result = {"has_backward": bool(differentiated(checker.c, checker.op)), "batch_invariance": bi}
    with contention(checker.device) if loaded else contextlib.nullcontext():
        bi["all_rows"] = checker.all_rows()
        on_step("all_rows", result)
        bi["params_repeatable"] = checker.params_repeatable()
        on_step("params_repeatable", result)
        bi["full_vs_sub_batches"] = checker.full_vs_sub_batches()
        on_step("full_vs_sub_batches", result)
        bi["batch_size_sweep"] = checker.batch_size_sweep()
    sub, sweep = bi["full_vs_sub_batches"], bi["batch_size_sweep"]
    bi["batch_invariant"] = (
        all(r["fwd_differ"] == 0 and r["rowgrad_differ"] == 0 for r in bi["all_rows"].values())
        and bi["params_repeatable"]
        and sub["fwd_differ"] == 0
        and sub["rowgrad_differ"] == 0
        and sweep["differ"] == 0
    )
    on_step("batch_size_sweep", result)
    result["accuracy_latency"] = checker.accuracy_latency()
    on_step("accuracy_latency", result)
    return result


def run_prior_art(
    job: Job,
    op: OpSpec,
    mode: Mode,
    device: torch.device,
    runnable: list[tuple[str, Candidate]],
    emit: Emit,
) -> None:
    """Events per candidate: ``Start``/``Done`` per check (``data`` is the result so far), or
    ``Failed`` with the reason."""
    await_turn(emit)
    sizes = sizes_from_json(job.sizes)
    input_cache: dict = {}
    for name, c in runnable:
        checker = Checker(c, op, mode, device, sizes, input_cache)
        current = [CHECKS[0]]
        emit(Start(name, current[0]))

        def step(check: str, result: dict, _name=name) -> None:
            emit(Done(_name, check, result))
            if check != CHECKS[-1]:
                current[0] = CHECKS[CHECKS.index(check) + 1]
                emit(Start(_name, current[0]))

        try:
            with phase("compute"):  # the checks' evaluations; their inputs and comparisons are timed apart
                check_candidate(checker, step, loaded=job.contention)
        except Exception as exc:
            emit(Failed(name, current[0], f"{current[0]}: {error_text(exc)}"))
        if device.type == "cuda":
            torch.cuda.empty_cache()
