"""``audit chain`` across modes: one chain worker per mode (``audit.worker.chain``), as ``audit run``
runs one worker per mode, each started through ``audit.parent.launch`` with the mode's variables
and the interpreter of its environment. A mode that cannot be switched on, a worker that dies and
one that passes the deadline each become ``{"unavailable": reason}`` for that mode; the other modes
run. The chain is one computation per length, not candidates x cases, so the runner's
per-candidate retry and blame do not apply.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Callable

import torch

from audit.core.backends import DETERMINISTIC_VARIABLES
from audit.core.chain import REPEATS, labels
from audit.parent import launch
from audit.parent.assemble import header
from audit.parent.interpreters import Environments, worker_setup
from audit.parent.provenance import collect
from audit.core.names import CHAIN_OP as OP
from reports.chain import ChainReplay, ChainReport, ChainStage
from reports.kinds import kind_name

KIND = kind_name(ChainReport)


def run_modes(
    job: dict,
    modes: list[str],
    *,
    timeout: float,
    environments: Environments,
    inherit: tuple[str, ...],
    advance: Callable[[str], None],
    worker: str = "audit.worker.chain",
) -> tuple[dict[str, dict], dict[str, dict[str, str]]]:
    """(each mode's findings: the JSON of ``worker`` (a module run with ``JOB RESULT``) or
    ``{"unavailable": reason}``, plain first; each mode's recorded variables). With
    ``job["deterministic"]`` every worker also gets ``DETERMINISTIC_VARIABLES``, recorded."""
    found: dict[str, dict] = {}
    recorded: dict[str, dict[str, str]] = {}
    with launch.job_dir(worker.rpartition(".")[2]) as workdir:
        for mode in sorted(modes, key=lambda m: m != "plain"):
            setup = worker_setup(
                mode,
                environments=environments,
                inherit=inherit,
                needs_cuda=job["device"].startswith("cuda"),
                timeout=timeout,
            )
            if job["deterministic"]:
                setup = dataclasses.replace(
                    setup,
                    variables={**setup.variables, **DETERMINISTIC_VARIABLES},
                    recorded=dict(sorted({**setup.recorded, **DETERMINISTIC_VARIABLES}.items())),
                )
            recorded[mode] = setup.recorded
            if setup.problem is not None:
                found[mode] = {"unavailable": f"environment {setup.environment} ({setup.python}): {setup.problem}"}
            else:
                found[mode] = _run_one(dict(job, mode=mode), setup, workdir=workdir, timeout=timeout, worker=worker)
            advance(mode)
    return found, recorded


def _run_one(job: dict, setup, *, workdir, timeout: float, worker: str) -> dict:
    stem = workdir / job["mode"]
    job_path, result_path = stem.with_suffix(".job.json"), stem.with_suffix(".result.json")
    job_path.write_text(json.dumps(job))
    worker = launch.start(
        ["-m", worker, str(job_path), str(result_path)],
        variables=setup.variables,
        log=stem.with_suffix(".log"),
        python=setup.python,
    )
    code = worker.wait(time.monotonic() + timeout)
    worker.kill()  # what it left behind goes too
    if code == 0 and result_path.exists():
        return json.loads(result_path.read_text())
    what = launch.ended(code, timeout=timeout)
    if code == 0:
        what = "exited with status 0 without writing its result"
    return {"unavailable": f"mode {job['mode']} process {what}:\n{worker.tail()}"}


def chain_report(job: dict, found: dict[str, dict], recorded: dict[str, dict[str, str]]) -> dict:
    """The ``h3_conditioning_chain_replay`` report. A mode whose inputs' fingerprints differ from
    the first mode's becomes unavailable (it would replay a different problem)."""
    prints, results, environment = mode_results(
        job,
        found,
        recorded,
        lambda data: ChainReplay.summary([ChainStage.model_validate(s) for s in data["stages"]]),
    )
    return {
        **header(KIND, OP, environment),
        "block": job["block"],
        "lengths": job["lengths"],
        "backward": job["backward"],
        "repeats": REPEATS,
        "candidates": labels(job["choices"]),
        "inputs_sha256": prints,
        "results": results,
        "sdpa": sdpa_record(job, found),
    }


def mode_results(
    job: dict, found: dict[str, dict], recorded: dict[str, dict[str, str]], summary: Callable[[dict], dict]
) -> tuple[dict, dict[str, dict], dict]:
    """(the first mode's input fingerprints, each mode's entry, the environment block) from the
    workers' findings: each length's data with its ``summary`` fields added (a length the worker
    wrote nothing for: unavailable, saying so). A mode whose inputs' fingerprints differ from the
    first mode's becomes unavailable (it would run another problem)."""
    ran = [f for f in found.values() if "unavailable" not in f]
    prints = ran[0]["inputs_sha256"] if ran else {}
    results: dict[str, dict] = {}
    for mode, f in found.items():
        if "unavailable" in f:
            results[mode] = f
        elif f["inputs_sha256"] != prints:
            results[mode] = {"unavailable": f"inputs in mode {mode} differ from mode {next(iter(found))}'s"}
        else:
            lengths = {}
            for n in map(str, job["lengths"]):  # every length, as the report's schema asks
                data = f["lengths"].get(n)
                missing = {"unavailable": f"mode {mode}'s worker wrote no result for length {n}"}
                lengths[n] = missing if data is None else {**data, **summary(data)}
            results[mode] = {"description": f["description"], "lengths": lengths}
    environment = collect(torch.device(job["device"]), recorded, any(f.get("tf32", False) for f in ran))
    return prints, results, environment


def sdpa_record(job: dict, found: dict[str, dict]) -> dict:
    """The report's ``sdpa``: the setting asked for (or chosen by the default rule) and, per mode
    that ran, the SDPA backend its worker saw torch run."""
    return {
        "attention": job["attention"],
        "deterministic": job["deterministic"],
        "default": job["setting_default"],
        "ran": {mode: f["sdpa_backend"] for mode, f in found.items() if "sdpa_backend" in f},
    }
