"""The dispatch switches a worker reads (``audit.core.dispatch``), on the CPU."""

import torch

from audit.core import dispatch
from modes import get_mode

CPU = torch.device("cpu")


def test_on_a_cpu_the_gpu_libraries_say_they_do_not_apply_and_variables_are_as_set(monkeypatch):
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    monkeypatch.delenv("TORCH_DISABLE_NATIVE_JIT", raising=False)
    found = dispatch.switches(get_mode("plain"), CPU)
    assert {found[k] for k in ("nvidia_driver", "cublas", "cublaslt", "cudnn")} == {"unavailable: CPU device"}
    assert found["variables"]["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
    assert found["variables"]["TORCH_DISABLE_NATIVE_JIT"] is None
    assert found["decisions"] == {}  # plain mode switches nothing on


def test_torch_native_lists_the_registered_overrides_or_says_it_is_missing():
    found = dispatch.torch_native()
    try:
        from torch._native import registry
    except ImportError:
        assert found == f"unavailable: torch {torch.__version__} has no torch._native"
        return
    assert found == sorted(
        f"{op}@{key}: {n.dsl_name}{'' if n.active else ' (inactive)'}"
        for (op, key), nodes in registry._graphs.items()
        for n in nodes
    )


def test_the_driver_version_is_read_from_the_kernel_module_file(tmp_path, monkeypatch):
    file = tmp_path / "version"
    file.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build\nGCC:\n")
    monkeypatch.setattr(dispatch, "DRIVER_FILE", file)
    assert dispatch.nvidia_driver() == "570.124.06"
    file.write_text("something else\n")
    assert dispatch.nvidia_driver().startswith("unavailable: no version in")
    monkeypatch.setattr(dispatch, "DRIVER_FILE", tmp_path / "absent")
    assert dispatch.nvidia_driver().startswith("unavailable: ")


def test_a_library_whose_decision_cannot_be_read_says_why():
    found = dispatch.decisions(get_mode("sglang"))
    assert list(found) == ["sglang"]
    if "unavailable" not in found["sglang"]:  # SGLang installed: its route is named
        assert found["sglang"].startswith("bf16 mm -> ")
