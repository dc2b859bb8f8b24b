"""The library adapters without their libraries or a GPU: registration, availability reasons,
mode switches that must refuse with a reason, the Liger row rule and Megatron's API detection.

Nothing here stands in for a library's numerics: tests that need a library skip when it is
installed, and the Megatron tests that use stand-in functions check only our own detection logic.
"""

import importlib.util
import subprocess
import sys

import pytest
import torch

import adapters.liger
import adapters.megatron
import adapters.sglang
import adapters.transformer_engine
import adapters.vllm
import rl_kernel_ops
from audit.candidates import get_candidate, unavailable_reason
from audit.inputs import draw_inputs
from audit.ops import HIDDEN, get_op
from modes import get_mode

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def installed(top: str) -> bool:
    return importlib.util.find_spec(top) is not None


@pytest.mark.parametrize(
    "name, grads, requires",
    [
        ("liger", ("x", "w", "sh", "sc"), ("liger_kernel.ops",)),
        ("liger_rlk_gather", ("x", "w", "sh", "sc"), ("liger_kernel.ops",)),
        ("sglang", (), (adapters.sglang.kernel_module(),)),
        ("transformer_engine", ("x",), ("transformer_engine.pytorch",)),
    ],
)
def test_registration(name, grads, requires):
    c = get_candidate("norm_modulate", name)
    assert (c.op, c.grads, c.requires, c.cuda_only, c.all_modes) == ("norm_modulate", grads, requires, True, False)
    assert c.report_name("plain") == name and c.runs_in("plain") and not c.runs_in("sglang")


@pytest.mark.parametrize("name", ["liger", "liger_rlk_gather", "sglang", "transformer_engine"])
def test_cpu_device_is_named_among_the_reasons(name):
    reason = unavailable_reason(get_candidate("norm_modulate", name), CPU)
    assert reason.endswith("needs a CUDA device; this run uses cpu")


@pytest.mark.parametrize(
    "name, top",
    [("liger", "liger_kernel"), ("liger_rlk_gather", "liger_kernel"), ("sglang", "sglang"), ("transformer_engine", "transformer_engine")],
)
def test_missing_library_is_the_reason_on_a_cuda_device(name, top):
    if installed(top):
        pytest.skip(f"{top} is installed here")
    assert unavailable_reason(get_candidate("norm_modulate", name), CUDA) == f"{top} is not installed"


def test_sglang_kernel_path_defaults_to_the_0_5_10_layout_without_sglang():
    if installed("sglang"):
        pytest.skip("sglang is installed here")
    assert adapters.sglang.kernel_module() == "sglang.jit_kernel.diffusion.cutedsl.scale_residual_norm_scale_shift"


@pytest.mark.parametrize("gather", [adapters.liger.index_select_rows, rl_kernel_ops.adaln_row_gather], ids=["index_select", "rlk_gather"])
def test_liger_gets_one_modulation_row_per_token(gather):
    t = draw_inputs(get_op("norm_modulate"), 257, seed=257)
    scale, shift = adapters.liger.liger_rows(t, gather)
    assert scale.shape == shift.shape == t["x"].shape == (257, HIDDEN)
    assert torch.equal(scale, t["sc"][t["idx"]]) and torch.equal(shift, t["sh"][t["idx"]])


def test_liger_rejects_a_table_it_would_broadcast_by_prefix():
    t = draw_inputs(get_op("norm_modulate"), 18, seed=18)  # 18 rows over a 9-row table: Liger would accept it
    with pytest.raises(ValueError, match=r"need one row per token, \(18, 5376\)"):
        adapters.liger.liger_rows(t, lambda table, idx: table)


@pytest.mark.parametrize(
    "mode, top",
    [("vllm", "vllm"), ("sglang", "sglang"), ("sglang_ieee", "sglang"), ("megatron_triton", "megatron"), ("megatron_te_native", "megatron")],
)
def test_mode_refuses_when_its_library_is_missing(mode, top):
    if installed(top):
        pytest.skip(f"{top} is installed here")
    with pytest.raises(ImportError, match=f"^{top} is not installed$"):
        get_mode(mode).call("enable")


def test_vllm_reason_names_the_missing_library():
    if installed("vllm"):
        pytest.skip("vllm is installed here")
    with pytest.raises(ImportError, match="^vllm is not installed$"):
        adapters.vllm.batch_invariant_module()


# --- Megatron: our detection of the two API shapes, checked with stand-in functions/modules ---


def test_megatron_detection_stand_in_no_backend_signature_gives_triton_only():
    def enable():  # the megatron-core 0.19.2 shape
        pass

    assert adapters.megatron.enable_arguments(enable, "triton", "megatron-core 0.19.2") == {}
    with pytest.raises(RuntimeError, match="takes no backend argument.*te_native backend cannot be selected"):
        adapters.megatron.enable_arguments(enable, "te_native", "megatron-core 0.19.2")


def test_megatron_detection_stand_in_backend_signature_passes_the_variant():
    def enable(backend: str = "deepgemm"):  # the Megatron-LM source-tree shape
        pass

    for variant in ("te_native", "triton"):
        assert adapters.megatron.enable_arguments(enable, variant, "tree") == {"backend": variant}


class _StandInKernels:
    """Stands in for 0.19.2's module shape to check our failure handling: enable registers its
    overrides, then fails importing Transformer Engine."""

    def __init__(self):
        self.enabled = False

    def enable_batch_invariant_mode(self):
        self.enabled = True
        raise ModuleNotFoundError("No module named 'transformer_engine'")

    def disable_batch_invariant_mode(self):
        self.enabled = False


def test_megatron_detection_stand_in_failed_enable_is_undone_and_explained(monkeypatch):
    stand_in = _StandInKernels()
    monkeypatch.setattr(adapters.megatron, "kernels", lambda: stand_in)
    monkeypatch.setattr(adapters.megatron, "_describe", lambda: "megatron-core 0.19.2")
    with pytest.raises(RuntimeError) as err:
        adapters.megatron.enable_mode(get_mode("megatron_triton"))
    assert str(err.value) == (
        "megatron-core 0.19.2: enable_batch_invariant_mode() failed: "
        "ModuleNotFoundError: No module named 'transformer_engine'"
    )
    assert stand_in.enabled is False


def test_megatron_detection_stand_in_list_names_missing_transformer_engine(monkeypatch):
    """`audit list` must not call the 0.19.2-shaped mode available where enabling it would fail
    importing Transformer Engine."""
    if installed("transformer_engine"):
        pytest.skip("transformer_engine is installed here")
    monkeypatch.setattr(adapters.megatron, "kernels", lambda: _StandInKernels())
    monkeypatch.setattr(adapters.megatron, "_describe", lambda: "megatron-core 0.19.2")
    assert get_mode("megatron_triton").problem() == (
        "megatron-core 0.19.2: enable_batch_invariant_mode() imports Transformer Engine, "
        "and transformer_engine is not installed"
    )
    assert "te_native backend cannot be selected" in get_mode("megatron_te_native").problem()


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
