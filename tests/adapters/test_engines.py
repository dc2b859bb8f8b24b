"""The rollout engines' MiniMax-H3 kernels (adapters/sglang.py, adapters/vllm_omni.py) without the
engines or a GPU: what ``audit list`` says of them, what their ``source`` says ran, the wording when
an installed engine lacks a kernel, and how a dispatcher's branch is read.

Neither engine imports on this CPU machine (vLLM-Omni needs vLLM; SGLang's runtime needs a
torchvision built for this torch), so no engine numerics run here. The module trees written under
``tmp_path`` are stand-ins: for an older engine that lacks a kernel (the real 0.5.10.post1 has no
``sglang.kernels`` at all), and for SGLang's model module, to exercise only our own detection and
branch-reading logic.
"""

import importlib.util
import subprocess
import sys
import textwrap

import pytest

from reports.hints import install_hint
import torch

import adapters.sglang
from audit.core.candidates import get_candidate, unavailable_reason
from audit.core.inputs import draw_inputs
from audit.core.ops import get_op
from tests.helpers import REPO, audit

CPU, CUDA = torch.device("cpu"), torch.device("cuda")
_OPS, _MODEL = "sglang.kernels.ops.diffusion", "sglang.multimodal_gen.runtime.models.dits.minimax_h3"
_OMNI = "vllm_omni.diffusion.layers.indexed_modulation"
# op, candidate, requirement, CUDA only
ENGINE_CANDIDATES = [
    ("norm_modulate", "sglang_indexed_scale_shift", f"{_OPS}:indexed_scale_shift_bf16_", True),
    ("norm_modulate", "sglang_rmsnorm_indexed_scale_shift", f"{_OPS}:rmsnorm_indexed_scale_shift", True),
    ("gate_residual", "sglang_indexed_gate", f"{_OPS}:indexed_gate_bf16", True),
    ("norm_modulate", "sglang_modulate_rmsnorm_scale_shift", f"{_MODEL}:_modulate_rmsnorm_scale_shift", False),
    ("norm_modulate", "sglang_modulate_rmsnorm_scale_shift_fused", f"{_MODEL}:_modulate_rmsnorm_scale_shift", False),
    ("gate_residual", "sglang_modulate_gate", f"{_MODEL}:_modulate_gate", False),
    ("gate_residual_norm_modulate", "sglang_indexed_gate_scale_shift", f"{_OPS}:indexed_scale_shift_bf16_", True),
    (
        "gate_residual_norm_modulate",
        "sglang_indexed_gate_rmsnorm_indexed_scale_shift",
        f"{_OPS}:rmsnorm_indexed_scale_shift",
        True,
    ),
    (
        "gate_residual_norm_modulate",
        "sglang_modulate_gate_rmsnorm_scale_shift",
        (f"{_MODEL}:_modulate_gate", f"{_MODEL}:_modulate_rmsnorm_scale_shift"),
        False,
    ),
    ("norm_modulate", "vllm_omni_rms_norm_indexed_scale_shift", f"{_OMNI}:rms_norm_indexed_scale_shift", False),
    ("norm_modulate", "vllm_omni_indexed_scale_shift", f"{_OMNI}:indexed_scale_shift_", False),
    ("gate_residual", "vllm_omni_indexed_gate", f"{_OMNI}:indexed_gate", False),
    (
        "gate_residual_norm_modulate",
        "vllm_omni_indexed_gate_rms_norm_scale_shift",
        f"{_OMNI}:indexed_gate_rms_norm_scale_shift",
        False,
    ),
]
OMNI_CANDIDATES = [(op, name) for op, name, *_ in ENGINE_CANDIDATES if name.startswith("vllm_omni")]


@pytest.mark.parametrize("op, name, requirement, cuda_only", ENGINE_CANDIDATES)
def test_registration_forward_only_in_plain_mode(op, name, requirement, cuda_only):
    c = get_candidate(op, name)
    requires = requirement if isinstance(requirement, tuple) else (requirement,)
    assert (c.grads, c.requires, c.cuda_only, c.all_modes, c.mode) == ((), requires, cuda_only, False, "plain")


def test_audit_list_shows_each_with_its_availability():
    listing = audit("list", "--device", "cpu", env={"COLUMNS": "400"})
    assert listing.returncode == 0, listing.stderr
    rows = {line.split("│")[2].strip(): line for line in listing.stdout.splitlines() if line.count("│") > 5}
    for op, name, requirement, cuda_only in ENGINE_CANDIDATES:
        reason = unavailable_reason(get_candidate(op, name), CPU)
        assert rows[name].split("│")[1].strip() == op
        assert rows[name].split("│")[4].strip() == "none (forward only)"
        shown = rows[name].split("│")[5].strip()  # the reason, then the extra that installs what is missing
        hint = install_hint(reason) if reason else None
        assert shown == ("yes" if reason is None else f"no: {reason}" + (f" · install: {hint}" if hint else ""))
        if cuda_only:
            assert reason.endswith("needs a CUDA device; this run uses cpu")


@pytest.mark.skipif(importlib.util.find_spec("vllm_omni") is not None, reason="vLLM-Omni is installed here")
def test_vllm_omni_missing_is_the_reason():
    for op, name in OMNI_CANDIDATES:
        assert unavailable_reason(get_candidate(op, name), CPU) == "vllm_omni is not installed"


@pytest.mark.parametrize("op, name", OMNI_CANDIDATES)
def test_vllm_omni_source_says_which_path_its_dispatch_takes(op, name):
    source = get_candidate(op, name).source
    assert source("plain", CPU).endswith("its eager CPU path (the input is_cpu), not the Triton kernel; forward only")
    assert source("plain", CUDA).endswith("its Triton kernel; forward only")


def _tree(root, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def _dist(name: str, version: str) -> dict[str, str]:
    return {f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"}


def _reasons(path, names: list[tuple[str, str]]) -> list[str]:
    """unavailable_reason on the CPU for each (op, candidate), in a process with ``path`` first."""
    code = (
        "import sys, torch; from audit.core.candidates import get_candidate, unavailable_reason\n"
        f"for op, name in {names!r}: print(unavailable_reason(get_candidate(op, name), torch.device('cpu')))"
    )
    env = {"PYTHONPATH": f"{path}:{REPO}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_an_engine_without_the_kernel_names_its_version_and_the_missing_name(tmp_path):
    # stand-ins: an SGLang without sglang.kernels (as 0.5.10.post1), a vLLM-Omni without the module
    _tree(tmp_path, {"sglang/__init__.py": "", **_dist("sglang", "0.5.10.post1")})
    _tree(
        tmp_path, {"vllm_omni/__init__.py": "", "vllm_omni/diffusion/__init__.py": "", **_dist("vllm_omni", "0.28.0")}
    )
    _tree(tmp_path, {"vllm_omni/diffusion/layers/__init__.py": ""})
    gate, model = ("gate_residual", "sglang_indexed_gate"), ("gate_residual", "sglang_modulate_gate")
    omni = ("gate_residual", "vllm_omni_indexed_gate")
    assert _reasons(tmp_path, [gate, model, omni]) == [
        f"sglang 0.5.10.post1 has no {_OPS}.indexed_gate_bf16; needs a CUDA device; this run uses cpu",
        f"sglang 0.5.10.post1 has no {_MODEL}._modulate_gate",
        f"vllm_omni 0.28.0 has no {_OMNI}.indexed_gate",
    ]


def test_a_module_without_the_name_or_a_missing_dependency(tmp_path):
    # stand-in: the kernels' import surface without one kernel, and with one whose module needs triton
    lazy = """
        _EXPORTS = {"indexed_gate_bf16": "sglang.kernels.ops.diffusion.triton_kernel"}

        def __getattr__(name):
            import importlib

            return getattr(importlib.import_module(_EXPORTS[name]), name)

        def __dir__():
            return list(_EXPORTS)
    """
    _tree(tmp_path, {"sglang/__init__.py": "", "sglang/kernels/__init__.py": "", "sglang/kernels/ops/__init__.py": ""})
    _tree(tmp_path, {"sglang/kernels/ops/diffusion/__init__.py": lazy, **_dist("sglang", "0.5.22")})
    _tree(tmp_path, {"sglang/kernels/ops/diffusion/triton_kernel.py": "import triton\n"})
    assert _reasons(
        tmp_path, [("norm_modulate", "sglang_indexed_scale_shift"), ("gate_residual", "sglang_indexed_gate")]
    ) == [
        f"sglang 0.5.22 has no {_OPS}.indexed_scale_shift_bf16_; needs a CUDA device; this run uses cpu",
        f"import {_OPS} failed: ModuleNotFoundError: No module named 'triton'; needs a CUDA device; this run uses cpu",
    ]


STAND_IN_MODEL = """
import torch

def indexed_gate_bf16_(x, gate, other, indices):
    return x.add_(gate.index_select(0, indices) * other)

def _modulate_gate(x, gate, other, indices, *, dtype, allow_inplace=True):
    if x.shape[0] > 1:  # the stand-in's own condition: one row takes the eager fallback
        return indexed_gate_bf16_(x, gate, other, indices)
    return (x + gate.index_select(0, indices) * other).to(dtype)
"""


def test_a_dispatcher_branch_is_read_and_a_case_served_otherwise_fails(tmp_path, monkeypatch):
    # stand-in for SGLang's model module: our wrapping of its kernel names is what is tested
    others = "".join(f"{n} = None\n" for n in adapters.sglang._DISPATCHED if n != "indexed_gate_bf16_")
    _tree(tmp_path, {"standin_h3.py": STAND_IN_MODEL + others})
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(adapters.sglang, "_H3_MODEL", "standin_h3")
    adapters.sglang._probed.cache_clear()
    c = get_candidate("gate_residual", "sglang_modulate_gate")
    assert "_modulate_gate: served by the eager fallback for a one-row probe on cpu" in c.source("plain", CPU)
    one = draw_inputs(get_op("gate_residual"), 1, seed=1)
    assert torch.equal(c.forward(one), one["res"] + one["gate"].index_select(0, one["idx"]) * one["y"])
    two = draw_inputs(get_op("gate_residual"), 2, seed=2)
    res = two["res"].clone()
    with pytest.raises(RuntimeError, match="served indexed_gate_bf16_ for this case, not the eager fallback"):
        c.forward(two)
    assert torch.equal(two["res"], res)  # the in-place kernel wrote into a copy of res
    import standin_h3

    assert standin_h3.indexed_gate_bf16_.__name__ == "indexed_gate_bf16_"  # the wrapping is undone
    adapters.sglang._probed.cache_clear()


def test_a_half_failed_import_keeps_its_first_reason(tmp_path):
    # the package's __init__ imports a submodule, then fails: the submodule stays in sys.modules, so
    # a second import of it would succeed although the package never imported
    _tree(tmp_path, {"halfpkg/__init__.py": "from . import part\nimport halfpkg_missing_dependency\n"})
    _tree(tmp_path, {"halfpkg/part.py": ""})
    code = "from audit.core.packages import import_problem\nfor _ in range(2): print(import_problem('halfpkg.part'))"
    env = {"PYTHONPATH": f"{tmp_path}:{REPO}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    reason = "import halfpkg.part failed: ModuleNotFoundError: No module named 'halfpkg_missing_dependency'"
    assert done.stdout.splitlines() == [reason, reason]


def test_the_adaln_cache_checkpoint_holds_the_weights_and_is_written_once_per_weights():
    from safetensors.torch import load_file

    w = torch.randn(18 * 8, 16).to(torch.bfloat16)
    b = torch.randn(18 * 8).to(torch.bfloat16)
    path = adapters.sglang._checkpoint(w, b)
    stored = load_file(path)
    assert torch.equal(stored["blocks.0.adaln_proj.linear.weight"], w)
    assert torch.equal(stored["blocks.0.adaln_proj.linear.bias"], b)
    assert stored["final_layer.adaln_proj.linear.weight"].shape == (16, 16)
    assert adapters.sglang._checkpoint(w.clone(), b.clone()) == path  # bitwise the same weights: reused
    moved = w.clone()
    moved[0, 0] = -moved[0, 0] if moved[0, 0] != 0 else 1
    other = adapters.sglang._checkpoint(moved, b)
    assert other != path and torch.equal(load_file(other)["blocks.0.adaln_proj.linear.weight"], moved)
