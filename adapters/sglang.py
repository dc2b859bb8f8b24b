"""SGLang: its CuTe-DSL fused norm kernels and its batch-invariant RMSNorm as candidates, and its
batch-invariant ops as the ``sglang`` / ``sglang_ieee`` / ``sglang_deepgemm`` modes.

Candidate ``sglang`` (norm_modulate): ``fused_norm_scale_shift(x, w, None, scale, shift, "rms",
eps)`` with x as (1, S, H) and scale/shift as (1, S, H) per-token rows gathered with
``index_select`` (the kernel takes [1], [D], [1|B, D], [1|B, 1|S, D] or [B, F, 1, D]). Forward
only: SGLang gives it no backward, so only its output is compared. It needs H % 256 == 0 and
H <= 8192 (one CTA of H / 256 warps per row) and says so itself otherwise. Expected: each row is
computed by one CTA alone, so the output cannot depend on the other rows; it keeps
``x * rstd * w`` in FP32 and rounds once before the FP32 modulation, so bitwise equality with
eager is not expected.

Candidate ``sglang_fused_residual`` (gate_residual): ``fused_scale_residual_norm_scale_shift(res,
y, gate_rows, None, None, 0, 0, "rms", eps)`` on (1, S, H) tensors returns ``(norm(res + gate*y)
* (1 + scale) + shift, res + gate*y)``; its second output is gate_residual, and is what is
compared (the first is computed too, with zero scale and shift, and is part of its latency).
Forward only, like ``sglang``.

The same kernel serves ``gate_residual_norm_modulate`` whole as ``sglang_fused_residual`` there:
``fused_scale_residual_norm_scale_shift(res, y, gate_rows, w, None, scale_rows, shift_rows, "rms",
eps)``, both outputs compared (stacked as residual, modulated).

Candidate ``sglang_bi_rmsnorm`` (norm_modulate): ``rms_norm_batch_invariant(x, w, eps=1e-5)``
from the batch-invariant ops (its default eps is 1e-6), modulated with ``index_select`` like the
references. It launches a Triton kernel (one program per row, FP32 sum of squares,
``x * (1 / sqrt(ms + eps)) * w`` in FP32, rounded once) into a fresh tensor, with no autograd
function around it: no gradient reaches x or w, so the candidate is forward only.

Modes: ``sglang.srt.batch_invariant_ops.enable_batch_invariant_mode()`` registers aten overrides
(mm, addmm, bmm, _log_softmax, mean.dim) for the whole process; ``disable_batch_invariant_mode()``
removes them. On sm_90+, bf16 mm goes to DeepGEMM when ``deep_gemm`` imports and
SGLANG_BATCH_INVARIANT_OPS_ENABLE_MM_DEEPGEMM is "1" (SGLang's default, read at import): the
``sglang`` and ``sglang_ieee`` modes set it to "0" (the Triton persistent matmul), and
``sglang_deepgemm`` sets "1" and then runs what SGLang runs: DeepGEMM where SGLang routes bf16 mm
there, else SGLang's own silent fallback, the Triton persistent matmul. Which one served is the
mode's dispatch decision (``dispatch``) and its description, and the kernel fingerprints show it;
``audit diff`` reports the switch as a kernel change.

MiniMax-H3's own kernels (SGLang >= 0.5.23, from ``sglang.kernels.ops.diffusion``, the engine's
only supported import surface; Triton, so CUDA only, and forward only: they write into a buffer
with no autograd function around them). The H3 DiT (``sglang/multimodal_gen/runtime/models/dits/
minimax_h3.py``) norms with ``nn.RMSNorm(H, eps, dtype=bf16)`` (its ``_norm``), then modulates that
fresh output in place, and gates into the residual:
- ``sglang_indexed_scale_shift`` (norm_modulate): ``F.rms_norm`` (what ``nn.RMSNorm.forward``
  calls: the model's norm and diffusers' ``norm1`` alike), then ``indexed_scale_shift_bf16_(normed,
  sh, sc, idx)`` in place on that output, as the model composes them at its default quality. The
  kernel rounds ``1 + scale`` to BF16, then ``x * that``, then adds shift, to copy eager aten.
- ``sglang_rmsnorm_indexed_scale_shift`` (norm_modulate): ``rmsnorm_indexed_scale_shift(x, w, sh,
  sc, idx, eps)``, the fused norm + modulation (one FP32 pass, one rounding) the model runs at
  quality lossless/high. Where the engine's guard ``can_use_rmsnorm_indexed_scale_shift`` refuses
  the tensors, the case fails with that refusal (the model would fall back to the unfused path).
  No ``accepts=`` hook: the guard needs tensors on the run's device, which meta tensors are not.
- ``sglang_indexed_gate`` (gate_residual): ``indexed_gate_bf16(res, gate, y, idx)``, out of place.
- gate_residual_norm_modulate, as the block runs its steps 4-5 (two calls; SGLang has no kernel
  for both): ``sglang_indexed_gate_scale_shift`` is ``indexed_gate_bf16`` then ``F.rms_norm`` and
  ``indexed_scale_shift_bf16_`` (default quality), ``sglang_indexed_gate_rmsnorm_indexed_scale_shift``
  is ``indexed_gate_bf16`` then the guarded ``rmsnorm_indexed_scale_shift`` (lossless/high).
- The dispatchers the model calls, as they pick a kernel from dtype, device, contiguity and
  strides, with an eager fallback: ``sglang_modulate_rmsnorm_scale_shift`` (``fused=False``: the
  model's ``norm1(x)`` then ``_modulate_scale_shift``), ``sglang_modulate_rmsnorm_scale_shift_fused``
  (``fused=True``) and ``sglang_modulate_gate`` (``allow_inplace=True``, on a copy of res: the
  block's residual buffer is its own to overwrite); for gate_residual_norm_modulate,
  ``sglang_modulate_gate_rmsnorm_scale_shift`` and ``..._fused``: ``_modulate_gate`` then
  ``_modulate_rmsnorm_scale_shift`` on its output, as the block calls them. They import the model
  module, so they need the engine's runtime to import. Which kernel served is read by wrapping the model module's kernel
  names while the dispatcher runs: ``source`` names what served a one-row probe of the op's dtypes
  on the run's device (or "the eager fallback"), and a case served otherwise fails, naming both.
  The wrapping, and building the model's norm around w, add a few microseconds of Python to each
  call, which their latency includes.
- Not here: ``indexed_scale_shift_fp32_`` and ``indexed_gate_fp32(_)`` take FP32 tables (INT8
  checkpoints keep the AdaLN tables in FP32) and round once; the ops draw BF16 tables and their
  references compute at BF16, so these need ops with FP32 tables and references for them, which do
  not exist yet. Upcasting the BF16 tables would audit a computation no reference defines.
- ``sglang_adaln_cache`` (adaln_projection): the AdaLN cache's rebuild path
  (``minimax_h3_adaln_cache.MiniMaxH3AdalnCache``, precision "match"), which the model uses instead
  of projecting every step. The case's w and b are written to a safetensors file as layer 0's
  ``adaln_proj.linear`` (the final layer's projection as zeros), a one-layer cache is built for one
  plan of T distinct FP32 timesteps whose ``embed`` returns ``silu(temb).to(bf16)`` (what the model's
  embed returns for its own time embedder), and the plan's table is read back from the slab: (T,
  96768), compared with the on-the-fly projections. As a single-GPU rollout: the module's
  ``get_tp_world_size`` is held at 1 while it builds (no distributed group exists in the audit's
  process). Forward only; its latency includes writing the file and building the cache, so it is
  not a speed figure (the file is written once per distinct w and b). A prior-art sub-batch builds
  the plan at the sub-batch's T, which is where the engine's own warning (cuBLAS picks kernels by
  M) would show.
Under an SGLang without these kernels (0.5.10) each is unavailable naming the version and the
missing name.
"""

from __future__ import annotations

import functools
import importlib
import os
import tempfile
import types
from typing import Callable

import torch

from adapters.diffusers import modulate
from adapters.pytorch import torch_rms_norm
from audit.core.candidates import candidate
from audit.core.inputs import draw_inputs
from audit.core.packages import import_problem, shipped_module, version
from audit.core.ops import EPS, get_op
from modes import SGLANG_DEEPGEMM

# where fused_norm_scale_shift lives: 0.5.10, then the later layout
_KERNEL_MODULES = (
    "sglang.jit_kernel.diffusion.cutedsl.scale_residual_norm_scale_shift",
    "sglang.kernels.ops.diffusion.norm.scale_residual_norm_cutedsl",
)
KERNEL = shipped_module(_KERNEL_MODULES)
_MODE_MODULE = "sglang.srt.batch_invariant_ops"
_H3_KERNELS = "sglang.kernels.ops.diffusion"
_H3_MODEL = "sglang.multimodal_gen.runtime.models.dits.minimax_h3"
# the kernels the model's dispatchers can call (its module-level names)
_DISPATCHED = (
    "indexed_scale_shift_bf16_",
    "indexed_scale_shift_fp32_",
    "rmsnorm_indexed_scale_shift",
    "indexed_gate_bf16",
    "indexed_gate_bf16_",
    "indexed_gate_fp32",
    "indexed_gate_fp32_",
)


@candidate(
    "sglang",
    ops=("norm_modulate",),
    source=lambda mode, device: f"SGLang {version('sglang')} fused_norm_scale_shift (CuTe DSL, {KERNEL}; forward only)",
    grads=(),
    requires=(KERNEL,),
    cuda_only=True,
)
def sglang(t: dict[str, torch.Tensor]) -> torch.Tensor:
    fused_norm_scale_shift = importlib.import_module(KERNEL).fused_norm_scale_shift
    scale, shift = _token_rows(t["sc"], t["idx"]), _token_rows(t["sh"], t["idx"])
    return fused_norm_scale_shift(t["x"].unsqueeze(0), t["w"], None, scale, shift, "rms", EPS).squeeze(0)


def _fused_residual(op: str, compared: str) -> dict:
    def source(mode: str, device: torch.device) -> str:
        kernel = f"fused_scale_residual_norm_scale_shift (CuTe DSL, {KERNEL})"
        return f"SGLang {version('sglang')} {kernel}, {compared}; forward only"

    return dict(ops=(op,), source=source, grads=(), requires=(KERNEL,), cuda_only=True)


@candidate("sglang_fused_residual", **_fused_residual("gate_residual", "its residual output res + gate*y"))
def sglang_fused_residual(t: dict[str, torch.Tensor]) -> torch.Tensor:
    fused = importlib.import_module(KERNEL).fused_scale_residual_norm_scale_shift
    res, y = t["res"].unsqueeze(0), t["y"].unsqueeze(0)
    zero = res.new_zeros(res.shape[-1])  # scale and shift of the norm output, which is not compared
    _, residual = fused(res, y, _token_rows(t["gate"], t["idx"]), None, None, zero, zero, "rms", EPS)
    return residual.squeeze(0)


@candidate("sglang_fused_residual", **_fused_residual("gate_residual_norm_modulate", "both outputs"))
def sglang_fused_residual_norm(t: dict[str, torch.Tensor]) -> torch.Tensor:
    fused = importlib.import_module(KERNEL).fused_scale_residual_norm_scale_shift
    idx = t["idx"]
    modulated, residual = fused(
        t["res"].unsqueeze(0),
        t["y"].unsqueeze(0),
        _token_rows(t["gate"], idx),
        t["w"],
        None,
        _token_rows(t["sc"], idx),
        _token_rows(t["sh"], idx),
        "rms",
        EPS,
    )
    return torch.stack((residual.squeeze(0), modulated.squeeze(0)), dim=1)


def _token_rows(table: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """One (1, S, H) row of ``table`` per token, the [1, S, D] layout the CuTe kernels take."""
    return table.index_select(0, idx).unsqueeze(0)


@candidate(
    "sglang_bi_rmsnorm",
    ops=("norm_modulate",),
    source=lambda mode, device: (
        f"SGLang {version('sglang')} {_MODE_MODULE}.rms_norm_batch_invariant + index_select (forward only)"
    ),
    grads=(),
    requires=(_MODE_MODULE,),
    cuda_only=True,
)
def sglang_bi_rmsnorm(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return modulate(_mode_module().rms_norm_batch_invariant(t["x"], t["w"], EPS), t)


def _h3_kernel(name: str):
    return getattr(importlib.import_module(_H3_KERNELS), name)


def _h3_source(what: str):
    return lambda mode, device: f"SGLang {version('sglang')} {_H3_KERNELS}.{what} (Triton; forward only)"


def _h3_meta(kernel: str, *, op: str) -> dict:
    return dict(ops=(op,), grads=(), requires=(f"{_H3_KERNELS}:{kernel}",), cuda_only=True)


@candidate(
    "sglang_indexed_scale_shift",
    source=_h3_source("indexed_scale_shift_bf16_ in place after F.rms_norm (nn.RMSNorm's forward)"),
    **_h3_meta("indexed_scale_shift_bf16_", op="norm_modulate"),
)
def sglang_indexed_scale_shift(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return _h3_kernel("indexed_scale_shift_bf16_")(torch_rms_norm(t), t["sh"], t["sc"], t["idx"])


@candidate(
    "sglang_rmsnorm_indexed_scale_shift",
    source=_h3_source("rmsnorm_indexed_scale_shift where can_use_rmsnorm_indexed_scale_shift accepts"),
    **_h3_meta("rmsnorm_indexed_scale_shift", op="norm_modulate"),
)
def sglang_rmsnorm_indexed_scale_shift(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return _rmsnorm_indexed_scale_shift(t["x"], t)


@candidate(
    "sglang_indexed_gate",
    source=_h3_source("indexed_gate_bf16 (out of place)"),
    **_h3_meta("indexed_gate_bf16", op="gate_residual"),
)
def sglang_indexed_gate(t: dict[str, torch.Tensor]) -> torch.Tensor:
    return _h3_kernel("indexed_gate_bf16")(t["res"], t["gate"], t["y"], t["idx"])


def _rmsnorm_indexed_scale_shift(x, t: dict[str, torch.Tensor]) -> torch.Tensor:
    """The guarded fused kernel on rows ``x``; where the engine's guard refuses, ValueError naming it."""
    w, sh, sc, idx = t["w"], t["sh"], t["sc"], t["idx"]
    if not _h3_kernel("can_use_rmsnorm_indexed_scale_shift")(x, w, sh, sc, idx):
        shapes = ", ".join(f"{n} {tuple(v.shape)} {v.dtype}" for n, v in {"x": x, **t}.items())
        raise ValueError(
            f"SGLang {version('sglang')} can_use_rmsnorm_indexed_scale_shift refuses {shapes} on {x.device} "
            "(the model then runs nn.RMSNorm and _modulate_scale_shift)"
        )
    return _h3_kernel("rmsnorm_indexed_scale_shift")(x, w, sh, sc, idx, EPS)


@candidate(
    "sglang_indexed_gate_scale_shift",
    source=_h3_source("indexed_gate_bf16, then indexed_scale_shift_bf16_ in place after F.rms_norm"),
    **_h3_meta("indexed_scale_shift_bf16_", op="gate_residual_norm_modulate"),
)
def sglang_indexed_gate_scale_shift(t: dict[str, torch.Tensor]) -> torch.Tensor:
    h1 = _h3_kernel("indexed_gate_bf16")(t["res"], t["gate"], t["y"], t["idx"])
    normed = torch_rms_norm({"x": h1, "w": t["w"]})
    return torch.stack((h1, _h3_kernel("indexed_scale_shift_bf16_")(normed, t["sh"], t["sc"], t["idx"])), dim=1)


@candidate(
    "sglang_indexed_gate_rmsnorm_indexed_scale_shift",
    source=_h3_source("indexed_gate_bf16, then rmsnorm_indexed_scale_shift where its guard accepts"),
    **_h3_meta("rmsnorm_indexed_scale_shift", op="gate_residual_norm_modulate"),
)
def sglang_indexed_gate_rmsnorm_indexed_scale_shift(t: dict[str, torch.Tensor]) -> torch.Tensor:
    h1 = _h3_kernel("indexed_gate_bf16")(t["res"], t["gate"], t["y"], t["idx"])
    return torch.stack((h1, _rmsnorm_indexed_scale_shift(h1, t)), dim=1)


Dispatch = Callable[[object, dict[str, torch.Tensor]], torch.Tensor]  # (model module, inputs) -> output


def _model_norm(model, w: torch.Tensor) -> torch.nn.Module:
    """The model's own norm (``_norm``: ``nn.RMSNorm(H, eps, dtype=bf16)``) holding ``w`` as its weight."""
    norm = model._norm(w.shape[0], eps=EPS)
    norm.weight = torch.nn.Parameter(w, requires_grad=False)
    return norm


def _dispatched(call: Dispatch, t: dict[str, torch.Tensor]) -> tuple[torch.Tensor, str]:
    """``call``'s output and the model's kernels it served with (" + "-joined), or "the eager
    fallback" where it called none: the model module's kernel names are wrapped while it runs."""
    model = importlib.import_module(_H3_MODEL)
    served: list[str] = []
    originals = {name: getattr(model, name) for name in _DISPATCHED}

    def recording(name: str, kernel):
        def record(*args, **kwargs):
            served.append(name)
            return kernel(*args, **kwargs)

        return record

    for name, kernel in originals.items():
        setattr(model, name, recording(name, kernel))
    try:
        out = call(model, t)
    finally:
        for name, kernel in originals.items():
            setattr(model, name, kernel)
    return out, " + ".join(served) or "the eager fallback"


@functools.cache
def _probed(op: str, call: Dispatch, device: torch.device) -> str:
    """What ``call`` serves a one-row case of ``op`` with on ``device``."""
    return _dispatched(call, {n: v.to(device) for n, v in draw_inputs(get_op(op), 1, seed=1).items()})[1]


def _dispatcher(name: str, dispatchers: tuple[str, ...], op: str, call: Dispatch) -> None:
    """Register ``call`` of the model's ``dispatchers`` (in the order it calls them) as candidate
    ``name`` of ``op``: its source names the branches a one-row probe took, and a case that takes
    others fails."""
    dispatcher = " + ".join(dispatchers)

    def source(mode: str, device: torch.device) -> str:
        return (
            f"SGLang {version('sglang')} {_H3_MODEL}.{dispatcher}: served by {_probed(op, call, device)} "
            f"for a one-row probe on {device.type} (forward only)"
        )

    def forward(t: dict[str, torch.Tensor]) -> torch.Tensor:
        out, served = _dispatched(call, t)
        probed = _probed(op, call, next(iter(t.values())).device)
        if served != probed:
            raise RuntimeError(f"{dispatcher} served {served} for this case, not {probed} as its source says")
        return out

    requires = tuple(f"{_H3_MODEL}:{d}" for d in dispatchers)
    candidate(name, ops=(op,), source=source, grads=(), requires=requires)(forward)


def _rmsnorm_scale_shift(fused: bool) -> Dispatch:
    def call(model, t: dict[str, torch.Tensor]) -> torch.Tensor:
        norm = _model_norm(model, t["w"])
        return model._modulate_rmsnorm_scale_shift(
            t["x"], norm, t["sh"], t["sc"], t["idx"], dtype=torch.bfloat16, fused=fused
        )

    return call


def _gate(model, t: dict[str, torch.Tensor]) -> torch.Tensor:
    return model._modulate_gate(t["res"].clone(), t["gate"], t["y"], t["idx"], dtype=torch.bfloat16)


def _gate_rmsnorm_scale_shift(fused: bool) -> Dispatch:
    norm = _rmsnorm_scale_shift(fused)

    def call(model, t: dict[str, torch.Tensor]) -> torch.Tensor:
        h1 = _gate(model, t)
        return torch.stack((h1, norm(model, {**t, "x": h1})), dim=1)

    return call


_GATE, _NORM = "_modulate_gate", "_modulate_rmsnorm_scale_shift"
_dispatcher("sglang_modulate_rmsnorm_scale_shift", (_NORM,), "norm_modulate", _rmsnorm_scale_shift(False))
_dispatcher("sglang_modulate_rmsnorm_scale_shift_fused", (_NORM,), "norm_modulate", _rmsnorm_scale_shift(True))
_dispatcher("sglang_modulate_gate", (_GATE,), "gate_residual", _gate)
_dispatcher(
    "sglang_modulate_gate_rmsnorm_scale_shift",
    (_GATE, _NORM),
    "gate_residual_norm_modulate",
    _gate_rmsnorm_scale_shift(False),
)
_dispatcher(
    "sglang_modulate_gate_rmsnorm_scale_shift_fused",
    (_GATE, _NORM),
    "gate_residual_norm_modulate",
    _gate_rmsnorm_scale_shift(True),
)


_ADALN_CACHE = "sglang.multimodal_gen.runtime.models.dits.minimax_h3_adaln_cache"


@candidate(
    "sglang_adaln_cache",
    ops=("adaln_projection",),
    source=lambda mode, device: (
        f"SGLang {version('sglang')} {_ADALN_CACHE}.MiniMaxH3AdalnCache rebuild (precision 'match', TP 1), "
        "the plan's table read back; forward only, latency includes the build"
    ),
    grads=(),
    requires=(f"{_ADALN_CACHE}:MiniMaxH3AdalnCache", "safetensors"),
)
def sglang_adaln_cache(t: dict[str, torch.Tensor]) -> torch.Tensor:
    module = importlib.import_module(_ADALN_CACHE)
    temb, w, b = t["temb"], t["w"], t["b"]
    rows, hidden = temb.shape[0], w.shape[0] // 18
    timesteps = torch.arange(1, rows + 1, dtype=torch.float32) / (rows + 1)  # one plan: T distinct keys
    arch = types.SimpleNamespace(num_layers=1, hidden_size=hidden)
    cache = module.MiniMaxH3AdalnCache(arch, weight_files=[_checkpoint(w, b)], max_plans=1, max_plan_width=rows)
    cache.load(temb.device)
    world = module.get_tp_world_size
    module.get_tp_world_size = lambda: 1
    try:
        cache.build([timesteps], embed=lambda ts: torch.nn.functional.silu(temb).to(torch.bfloat16))
    finally:
        module.get_tp_world_size = world
    slot = cache.lookup(timesteps.to(temb.device))
    return cache.block_params[slot, :rows, 0].clone()


_CHECKPOINT: dict[str, object] = {}  # the last weights written: "w", "b", "path", and the folder holding it


def _checkpoint(w: torch.Tensor, b: torch.Tensor) -> str:
    """A safetensors file holding ``w`` and ``b`` as layer 0's ``adaln_proj.linear`` (the final
    layer's projection as zeros), as the cache's rebuild reads a checkpoint. The file of the last
    weights is kept and reused while the weights are bitwise the same (every case and check of a
    run shares them), so a call does not write 500 MB."""
    same = _CHECKPOINT and all(
        _CHECKPOINT[k].shape == v.shape and torch.equal(_CHECKPOINT[k].view(torch.int16), v.detach().view(torch.int16))
        for k, v in (("w", w), ("b", b))
    )
    if not same:
        from safetensors.torch import save_file

        folder = tempfile.TemporaryDirectory()
        path = os.path.join(folder.name, "adaln.safetensors")
        zero = w.new_zeros(2 * (w.shape[0] // 18), w.shape[1])
        tensors = {
            "blocks.0.adaln_proj.linear.weight": w,
            "blocks.0.adaln_proj.linear.bias": b,
            "final_layer.adaln_proj.linear.weight": zero,
            "final_layer.adaln_proj.linear.bias": zero[:, 0],
        }
        save_file({k: v.detach().contiguous() for k, v in tensors.items()}, path)
        _CHECKPOINT.clear()
        _CHECKPOINT.update(w=w.detach().clone(), b=b.detach().clone(), path=path, folder=folder)
    return _CHECKPOINT["path"]


def _deepgemm_routes() -> bool:
    """Whether SGLang's batch-invariant mm sends bf16 to DeepGEMM in this process."""
    impl = importlib.import_module(f"{_MODE_MODULE}.batch_invariant_ops")
    return bool(getattr(impl, "ENABLE_JIT_DEEPGEMM", False) and getattr(impl, "_ENABLE_MM_DEEPGEMM", False))


def _mode_module():
    problem = import_problem(_MODE_MODULE)
    if problem:
        raise ImportError(problem)
    return importlib.import_module(_MODE_MODULE)


def mode_problem(mode) -> str | None:
    """Why ``mode`` cannot run here, without switching it on: the batch-invariant ops must import.
    A mode asking for DeepGEMM where SGLang would not route to it runs SGLang's fallback."""
    return import_problem(_MODE_MODULE)


def enable_mode(mode) -> str:
    """Switch SGLang's batch-invariant ops on for this process; returns what was switched on,
    naming the bf16 mm route SGLang took (for ``sglang_deepgemm``, also why it fell back)."""
    ops = _mode_module()
    deepgemm = _deepgemm_routes()
    ops.enable_batch_invariant_mode()
    dot = os.environ.get("TRITON_F32_DEFAULT", "tf32 (Triton default)")
    matmul = "DeepGEMM bf16 (Triton persistent matmul otherwise)" if deepgemm else "Triton persistent matmul"
    if mode.env.get(SGLANG_DEEPGEMM) == "1" and not deepgemm:
        why = import_problem("deep_gemm") or "needs sm_90+ and SGLANG_ENABLE_JIT_DEEPGEMM on"
        matmul += f", SGLang's fallback from DeepGEMM ({why})"
    return (
        f"SGLang {version('sglang')} {_MODE_MODULE}.enable_batch_invariant_mode(): aten mm/addmm/bmm via "
        f"{matmul}, _log_softmax and mean.dim overridden; FP32 dot {dot} [{mode.name}]"
    )


def dispatch(mode) -> str:
    """Where SGLang's batch-invariant mm sends bf16 in this process, read from the module's own
    switches (``audit.core.dispatch`` records it)."""
    impl = importlib.import_module(f"{_MODE_MODULE}.batch_invariant_ops")
    route = "DeepGEMM" if _deepgemm_routes() else "the Triton persistent matmul"
    return (
        f"bf16 mm -> {route} (batch_invariant_ops.ENABLE_JIT_DEEPGEMM={getattr(impl, 'ENABLE_JIT_DEEPGEMM', None)}, "
        f"_ENABLE_MM_DEEPGEMM={getattr(impl, '_ENABLE_MM_DEEPGEMM', None)})"
    )


def disable_mode(mode) -> str:
    _mode_module().disable_batch_invariant_mode()
    return f"SGLang {version('sglang')} {_MODE_MODULE}.disable_batch_invariant_mode() [{mode.name}]"
