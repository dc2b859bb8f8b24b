"""``audit.core.backends``: the names ``--attention`` takes, the default rule, and reading which SDPA
backend torch ran (on the CPU: ``flash`` for auto and flash, ``math`` for math; ``efficient`` and
``cudnn`` cannot run)."""

import pytest
import torch

from audit.core import backends

CPU = torch.device("cpu")


def test_unknown_names_are_a_problem_and_every_listed_backend_exists_in_this_torch():
    assert "unknown backend 'sparse'" in backends.problem("sparse")
    assert all(backends.problem(name) is None for name in backends.ATTENTION)


def test_the_default_rule_is_auto_without_backward_and_the_devices_repeatable_setting_with_it():
    assert backends.default_setting("cuda", False) == backends.Setting("auto", False)
    assert (
        backends.default_setting("cpu", True) == backends.REPEATABLE_BACKWARD["cpu"] == backends.Setting("auto", False)
    )
    assert backends.default_setting("cuda", True) == backends.REPEATABLE_BACKWARD["cuda"]


@pytest.mark.parametrize("name, ran", [("auto", "flash"), ("math", "math"), ("flash", "flash")])
def test_the_backend_that_ran_is_read_from_the_profiler(name, ran):
    assert backends.observe(name, heads=2, head_dim=128, length=17, device=CPU, backward=True) == {"ran": ran}


@pytest.mark.parametrize("name", ["efficient", "cudnn"])
def test_a_backend_the_cpu_cannot_run_is_unavailable_with_the_reason(name):
    found = backends.observe(name, heads=2, head_dim=128, length=17, device=CPU, backward=False)
    assert found["unavailable"].startswith(f"--attention {name} cannot run here at length 17: RuntimeError")
