"""The library adapters without their libraries or a GPU: registration, availability reasons,
mode switches that must refuse with a reason, the Liger row rule, the diffusers projection's
output, and Megatron's and vLLM's API detection.

Nothing here stands in for a library's numerics: tests that need a library skip when it is
installed, and the Megatron and vLLM tests that use stand-in modules (with the real attribute
layout or file layout) check only our own detection logic.
"""

import importlib.util
import re
import subprocess
import sys
import types

import pytest
import torch
from torch.func import functional_call

import adapters.diffusers
import adapters.liger
import adapters.megatron
import adapters.sglang
import adapters.transformer_engine
import adapters.vllm
import rl_kernel_ops
from audit.core.availability import mode_problem
from audit.core.candidates import candidates_for, from_report_name, get_candidate, unavailable_reason
from audit.core.packages import shipped_module
from audit.core.compare import bit_patterns
from audit.core.inputs import draw_inputs
from audit.core.ops import ADALN_OUT, HIDDEN, OPS as OPS_BY_NAME, get_op
from audit.parent.runner import plan
from audit.parent.tasks import BITWISE
from modes import MODES, SGLANG_DEEPGEMM, get_mode

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def installed(top: str) -> bool:
    return importlib.util.find_spec(top) is not None


_ALL = ("x", "w", "sh", "sc")
_TE = ("transformer_engine.pytorch", "transformer_engine_torch")
# op, candidate, grads, requires, the one mode it runs in
LIBRARY_CANDIDATES = [
    ("norm_modulate", "liger", _ALL, ("liger_kernel.ops",), "plain"),
    ("norm_modulate", "liger_rlk_gather", _ALL, ("liger_kernel.ops",), "plain"),
    ("norm_modulate", "sglang", (), (adapters.sglang.KERNEL,), "plain"),
    ("norm_modulate", "sglang_bi_rmsnorm", (), ("sglang.srt.batch_invariant_ops",), "plain"),
    ("norm_modulate", "megatron_bi_rmsnorm", _ALL, (adapters.megatron.KERNELS,), "plain"),
    ("norm_modulate", "vllm_bi_rmsnorm", (), (adapters.vllm.MODULE,), "plain"),
    ("norm_modulate", "transformer_engine", ("x",), ("transformer_engine.pytorch",), "plain"),
    ("norm_modulate", "te_rmsnorm_full", _ALL, _TE, "plain"),
    ("norm_modulate", "transformer_engine_cudnn", _ALL, _TE, "te_cudnn"),
    ("gate_residual", "sglang_fused_residual", (), (adapters.sglang.KERNEL,), "plain"),
]


@pytest.mark.parametrize("op, name, grads, requires, mode", LIBRARY_CANDIDATES)
def test_registration(op, name, grads, requires, mode):
    c = get_candidate(op, name)
    assert (c.op, c.grads, c.requires, c.cuda_only, c.all_modes) == (op, grads, requires, True, False)
    assert c.report_name(mode) == name and c.runs_in(mode)
    assert [m for m in MODES if c.runs_in(m)] == [mode]


def test_every_report_name_leads_back_to_its_candidate_and_mode():
    for op in OPS_BY_NAME:
        for c in candidates_for(op):
            for mode in [m for m in MODES if c.runs_in(m)] + [f"{c.mode}@rollout"]:
                assert from_report_name(op, c.report_name(mode)) == (c, mode)


@pytest.mark.parametrize(
    "op, name, says",
    [
        ("adaln_projection", "diffusers", "its report name is diffusers[MODE] (diffusers[plain])"),
        ("norm_modulate", "rl_kernel[plain]", "rl_kernel runs in mode plain only, so its report name is rl_kernel"),
        ("adaln_projection", "diffusers[plain", "with the closing bracket"),
        ("adaln_projection", "diffusers[vllm_bi]", "unknown mode 'vllm_bi'"),
        ("norm_modulate", "nope", "no candidate 'nope' for norm_modulate; registered: "),
        ("adaln_projection", "diffusers[plain]x", "with the closing bracket"),
        ("norm_modulate", "rl_kernel@", "mode 'plain@': no environment after '@'"),
    ],
)
def test_a_name_no_candidate_reports_under_is_refused_with_the_reason(op, name, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        from_report_name(op, name)


def test_transformer_engine_module_is_judged_as_the_unmodulated_norm_it_computes():
    assert get_candidate("norm_modulate", "transformer_engine").computes == "torch_rms_norm"
    assert get_candidate("norm_modulate", "te_rmsnorm_full").computes is None  # modulated: the op's reference


@pytest.mark.parametrize("op, name", [(op, name) for op, name, *_ in LIBRARY_CANDIDATES])
def test_cpu_device_is_named_among_the_reasons(op, name):
    reason = unavailable_reason(get_candidate(op, name), CPU)
    assert reason.endswith("needs a CUDA device; this run uses cpu")


@pytest.mark.parametrize(
    "op, name, requires", [(op, name, requires) for op, name, _, requires, _ in LIBRARY_CANDIDATES]
)
def test_missing_library_is_the_reason_on_a_cuda_device(op, name, requires):
    top = requires[0].split(".")[0]
    if installed(top):
        pytest.skip(f"{top} is installed here")
    assert unavailable_reason(get_candidate(op, name), CUDA).startswith(f"{top} is not installed")


def test_sglang_kernel_path_defaults_to_the_0_5_10_layout_without_sglang():
    if installed("sglang"):
        pytest.skip("sglang is installed here")
    assert adapters.sglang.KERNEL == "sglang.jit_kernel.diffusion.cutedsl.scale_residual_norm_scale_shift"


def test_te_cudnn_mode_runs_only_its_candidate_and_only_for_norm_modulate():
    mode = get_mode("te_cudnn")
    assert mode.env == {"NVTE_NORM_FWD_USE_CUDNN": "1", "NVTE_NORM_BWD_USE_CUDNN": "1"}
    assert [name for name, op in OPS_BY_NAME.items() if mode.runs(op)] == ["norm_modulate"]
    p = plan(get_op("norm_modulate"), BITWISE, modes=["plain", "te_cudnn"], names=None, units=[1], device=CPU)
    assert [c.name for c in p.by_mode["te_cudnn"]] == ["transformer_engine_cudnn"]
    assert "transformer_engine_cudnn" not in [c.name for c in p.by_mode["plain"]]


def test_library_modes_run_the_gemm_ops_and_leave_the_row_ops_to_plain():
    library = [m for m, mode in MODES.items() if mode.ops is None]
    for op in OPS_BY_NAME.values():
        assert [m for m in library if MODES[m].runs(op)] == (library if op.kind == "gemm" else ["plain"])


@pytest.mark.parametrize(
    "gather", [adapters.liger.index_select_rows, rl_kernel_ops.adaln_row_gather], ids=["index_select", "rlk_gather"]
)
def test_liger_gets_one_modulation_row_per_token(gather):
    t = draw_inputs(get_op("norm_modulate"), 257, seed=257)
    scale, shift = adapters.liger.liger_rows(t, gather)
    assert scale.shape == shift.shape == t["x"].shape == (257, HIDDEN)
    assert torch.equal(scale, t["sc"][t["idx"]]) and torch.equal(shift, t["sh"][t["idx"]])


def test_liger_rejects_a_table_it_would_broadcast_by_prefix():
    t = draw_inputs(get_op("norm_modulate"), 18, seed=18)  # 18 rows over a 9-row table: Liger would accept it
    with pytest.raises(ValueError, match=r"need one row per token, \(18, 5376\)"):
        adapters.liger.liger_rows(t, lambda table, idx: table)


def test_diffusers_projection_is_the_linear_layers_own_output():
    """No copy in the timed call: the adapter returns the tensor diffusers' linear layer produced,
    with the bits of the module's six chunks put back together (what it returned before)."""
    module = adapters.diffusers._adaln_modulation()
    if module is None:
        pytest.skip("the installed diffusers has no MiniMax-H3")
    gen = torch.Generator().manual_seed(0)
    width = 8  # a narrow temb keeps the test fast; the projection keeps the model's 96768 outputs
    t = {
        "temb": torch.randn(2, width, generator=gen),
        "w": torch.randn(ADALN_OUT, width, generator=gen).bfloat16(),
        "b": torch.randn(ADALN_OUT, generator=gen).bfloat16(),
    }
    seen = []
    hook = module.linear.register_forward_hook(lambda linear, args, out: seen.append(out))
    try:
        got = get_candidate("adaln_projection", "diffusers").forward(t)
    finally:
        hook.remove()
    assert got is seen[0] and got.shape == (2, ADALN_OUT)
    chunks = functional_call(module, {"linear.weight": t["w"], "linear.bias": t["b"]}, (t["temb"],))
    assert torch.equal(bit_patterns(got), bit_patterns(torch.cat(chunks, dim=-1).view(2, -1)))


@pytest.mark.parametrize(
    "mode, top",
    [
        ("vllm", "vllm"),
        ("sglang", "sglang"),
        ("sglang_ieee", "sglang"),
        ("sglang_deepgemm", "sglang"),
        ("megatron_triton", "megatron"),
        ("megatron_te_native", "megatron"),
        ("megatron_deepgemm", "megatron"),
    ],
)
def test_mode_refuses_when_its_library_is_missing(mode, top):
    if installed(top):
        pytest.skip(f"{top} is installed here")
    assert mode_problem(get_mode(mode)) == f"{top} is not installed"
    with pytest.raises(ImportError, match=f"^{top} is not installed$"):
        get_mode(mode).call("enable")


def test_sglang_modes_pin_the_deepgemm_switch():
    """The Triton modes must not depend on whether deep_gemm happens to be installed."""
    assert get_mode("sglang").env == {SGLANG_DEEPGEMM: "0"}
    assert get_mode("sglang_ieee").env == {SGLANG_DEEPGEMM: "0", "TRITON_F32_DEFAULT": "ieee"}
    assert get_mode("sglang_deepgemm").env == {SGLANG_DEEPGEMM: "1"}
    assert SGLANG_DEEPGEMM == "SGLANG_BATCH_INVARIANT_OPS_ENABLE_MM_DEEPGEMM"


# --- vLLM: the batch-invariant module under either path, found in a stand-in package's file layout ---


@pytest.fixture
def forget_vllm():
    """The stand-in vLLM leaves with the test that imported it."""
    yield
    for name in [n for n in sys.modules if n.split(".")[0] == "vllm"]:
        del sys.modules[name]


@pytest.mark.parametrize("path", adapters.vllm.MODULES)
def test_vllm_mode_accepts_either_module_path(path, tmp_path, monkeypatch, forget_vllm):
    if installed("vllm"):
        pytest.skip("vllm is installed here")
    module_file = tmp_path.joinpath(*path.split(".")).with_suffix(".py")
    module_file.parent.mkdir(parents=True)
    module_file.write_text("def enable_batch_invariant_mode():\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(adapters.vllm, "MODULE", shipped_module(adapters.vllm.MODULES))
    assert adapters.vllm.MODULE == path
    assert mode_problem(get_mode("vllm")) is None
    assert get_mode("vllm").call("enable").endswith(f"{path}.enable_batch_invariant_mode() [vllm]")


def test_vllm_reason_names_the_missing_library():
    if installed("vllm"):
        pytest.skip("vllm is installed here")
    with pytest.raises(ImportError, match="^vllm is not installed$"):
        adapters.vllm.batch_invariant_module()


# --- Megatron: our detection of the API shapes, checked with stand-in modules of the real layout ---

WHERE = "megatron stand-in"


def megatron_stand_in(backends: tuple[str, ...] | None, deepgemm: bool = False, fails: Exception | None = None):
    """A module laid out like Megatron's batch_invariant_kernels: megatron-core 0.19.2's when
    ``backends`` is None (enable takes no argument), otherwise a source tree's (57deb43 on), with
    ``enable_batch_invariant_mode(backend=...)``, ``_BATCH_INVARIANT_BACKENDS`` and
    ``HAVE_DEEPGEMM_BF16``. It records its calls; enable raises ``fails`` after registering."""
    module = types.ModuleType("batch_invariant_kernels")
    module.calls = []

    def enable(**kwargs):
        module.calls.append(("enable", kwargs))
        if fails:
            raise fails

    if backends is None:
        module.enable_batch_invariant_mode = lambda: enable()
    else:
        module.enable_batch_invariant_mode = lambda backend="deepgemm": enable(backend=backend)
        module._BATCH_INVARIANT_BACKENDS = backends
        module.HAVE_DEEPGEMM_BF16 = deepgemm
    module.disable_batch_invariant_mode = lambda: module.calls.append(("disable", {}))
    return module


@pytest.fixture
def use_megatron(monkeypatch):
    def use(module):
        monkeypatch.setattr(adapters.megatron, "kernels", lambda: module)
        monkeypatch.setattr(adapters.megatron, "_describe", lambda: WHERE)
        return module

    return use


def test_megatron_0_19_2_layout_offers_triton_only():
    module = megatron_stand_in(None)
    assert adapters.megatron.enable_arguments(module, "triton", WHERE) == {}
    for variant in ("te_native", "deepgemm"):
        with pytest.raises(RuntimeError, match=f"takes no backend argument.*the {variant} backend cannot be selected"):
            adapters.megatron.enable_arguments(module, variant, WHERE)


def test_megatron_backend_layout_passes_each_offered_variant():
    module = megatron_stand_in(("deepgemm", "triton", "te_native"), deepgemm=True)  # d98e8a6
    for variant in ("deepgemm", "triton", "te_native"):
        assert adapters.megatron.enable_arguments(module, variant, WHERE) == {"backend": variant}


def test_megatron_variant_outside_its_backends_is_refused_before_any_call(use_megatron):
    """Between 57deb43 and d98e8a6 te_native is no backend: `audit list` must say so, and the mode
    must refuse without calling enable (which would raise ValueError there)."""
    module = use_megatron(megatron_stand_in(("deepgemm", "triton")))
    reason = (
        f"{WHERE}: enable_batch_invariant_mode(backend=...) offers deepgemm, triton (_BATCH_INVARIANT_BACKENDS), "
        "not te_native"
    )
    assert mode_problem(get_mode("megatron_te_native")) == f"RuntimeError: {reason}"
    with pytest.raises(RuntimeError) as err:
        get_mode("megatron_te_native").call("enable")
    assert str(err.value) == reason and module.calls == []


def test_megatron_deepgemm_needs_the_modules_deepgemm_bindings(use_megatron):
    module = use_megatron(megatron_stand_in(("deepgemm", "triton"), deepgemm=False))
    assert mode_problem(get_mode("megatron_deepgemm")) == (
        f"RuntimeError: {WHERE}: the deepgemm backend needs DeepGEMM with bf16 bindings (HAVE_DEEPGEMM_BF16 is False)"
    )
    assert module.calls == []


@pytest.mark.parametrize("backends", [None, ("deepgemm", "triton", "te_native")], ids=["0.19.2", "d98e8a6"])
def test_megatron_every_layout_needs_transformer_engine(backends, use_megatron):
    """Both layouts import Transformer Engine, unguarded, once enabled."""
    if installed("transformer_engine"):
        pytest.skip("transformer_engine is installed here")
    use_megatron(megatron_stand_in(backends))
    call = "enable_batch_invariant_mode()" if backends is None else "enable_batch_invariant_mode(backend='triton')"
    assert mode_problem(get_mode("megatron_triton")) == (
        f"{WHERE}: {call} imports Transformer Engine, and transformer_engine is not installed"
    )


def test_megatron_enable_passes_the_variant(use_megatron):
    module = use_megatron(megatron_stand_in(("deepgemm", "triton", "te_native")))
    described = get_mode("megatron_te_native").call("enable")
    assert module.calls == [("enable", {"backend": "te_native"})]
    assert (
        described
        == f"{WHERE} {adapters.megatron.KERNELS}.enable_batch_invariant_mode(backend='te_native') [megatron_te_native]"
    )


def test_megatron_failed_enable_is_undone_and_explained(use_megatron):
    module = use_megatron(megatron_stand_in(None, fails=ModuleNotFoundError("No module named 'transformer_engine'")))
    with pytest.raises(RuntimeError) as err:
        get_mode("megatron_triton").call("enable")
    assert str(err.value) == (
        f"{WHERE}: enable_batch_invariant_mode() failed: ModuleNotFoundError: No module named 'transformer_engine'"
    )
    assert module.calls == [("enable", {}), ("disable", {})]


def test_megatron_source_tree_goes_first_on_sys_path(monkeypatch, tmp_path):
    if installed("megatron"):
        pytest.skip("megatron is installed here")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv(adapters.megatron.SRC_ENV, str(tmp_path))
    with pytest.raises(ImportError, match="^megatron is not installed$"):
        adapters.megatron.kernels()
    assert sys.path[0] == str(tmp_path.resolve())


def test_megatron_source_commit(monkeypatch, tmp_path):
    monkeypatch.delenv(adapters.megatron.SRC_ENV, raising=False)
    assert adapters.megatron.source_commit() is None
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    monkeypatch.setenv(adapters.megatron.SRC_ENV, str(tmp_path))
    assert adapters.megatron.source_commit() == head[:7]


def test_diffusers_adaln_projection_takes_a_column_shard():
    # MiniMaxH3AdaLayerNormModulation views its output as six H-wide tables, which half the output
    # features are not: the reference stops after the linear layer, so a tp_column rank runs it
    t = draw_inputs(get_op("adaln_projection"), 1, seed=1)
    whole = get_candidate("adaln_projection", "diffusers").forward(t)
    half = t["w"].shape[0] // 2
    shard = get_candidate("adaln_projection", "diffusers").forward({**t, "w": t["w"][half:], "b": t["b"][half:]})
    assert shard.shape == (1, half) and torch.equal(shard, whole[:, half:])
