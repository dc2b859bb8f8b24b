import os
from pathlib import Path

import pytest

from audit.parent import launch
from modes import MODES
from tests.helpers import SEEDS, SESSION_TEMPLATES, audit_in_process


# torch's CPU build runs its operators on GNU OpenMP threads, one per core, which spin before they
# sleep. When another process holds a core (the other pytest-xdist worker, a mode worker started
# ahead, a compiler), each small operator waits for a thread that is not running: a quick prior-art
# run took 95 s instead of 11 s beside one busy process. GOMP_SPINCOUNT=0 makes waiting threads
# sleep at once; it changes no result (the threads and the order of their work stay the same), and
# no report records it (``audit.parent.variables.is_recorded``). Every process the tests start
# inherits it; a value set in the shell is kept.
os.environ.setdefault("GOMP_SPINCOUNT", "0")

TERMINAL = ("COLUMNS", "LINES")

# The variables the session's worker templates leave out of their keys (besides the launcher's
# own), each read only after the fork, never while a template imports torch, diffusers and the
# workers: pytest's name of the running test, the temporary directory (a forked worker's tempfile
# looks it up afresh), the terminal's size (read when something is printed), the knobs of the test
# plugins (which a worker loads after the fork) and the modes' variables (read by cuBLAS when CUDA
# starts, or by vLLM, SGLang, Triton and Transformer Engine, none of which a template imports). So
# a test that gives its command its own TMPDIR, width, planted fault or mode still has its workers
# forked; one that patches PYTHONPATH, a numerics variable of torch's own or PYTHONHASHSEED gets new
# interpreters.
PLUGIN_KNOBS = ("LIFECYCLE_DIR", "FAULTY_CRASH_CASE", "KERNEL_SWITCH_IMPL", "PLANTED_STEP", "PLANTED_STEPS")
UNKEYED = (
    "PYTEST_CURRENT_TEST",
    "TMPDIR",
    *TERMINAL,
    *PLUGIN_KNOBS,
    *sorted({name for mode in MODES.values() for name in mode.env}),
)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """pytest-xdist, in the controller: hand each worker COLUMNS and LINES as this process's Python
    sees them. The controller imports GNU readline, which exports LINES=24 and COLUMNS=80 into the
    C environment off a terminal; the workers would inherit them, and the command line run in a
    worker's process (CliRunner) would print 80 columns wide instead of a serial run's width."""
    node.workerinput["terminal"] = {name: os.environ.get(name) for name in TERMINAL}


def pytest_configure(config):
    """In a pytest-xdist worker: COLUMNS and LINES as the controller's shell had them (see above),
    set before any test module imports the command line's consoles."""
    terminal = getattr(config, "workerinput", {}).get("terminal")
    for name, value in (terminal or {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session", autouse=True)
def worker_templates():
    """The session's worker templates (``audit.parent.launch.Templates``): ``audit_in_process`` starts
    and forks from them, and every ``audit`` process the tests start forks from them
    ($AUDIT_TEMPLATES). They end with the session. Not on a machine with a GPU: a worker forked from
    a process in which a library had initialised the CUDA driver could not use it, and the
    templates' imports have not been checked for that on one; there the workers are new
    interpreters, as from a shell."""
    import torch

    if torch.cuda.is_available():
        yield None
        return
    # Importing torch._dynamo (diffusers does) sets $TORCHINDUCTOR_CACHE_DIR in the importing
    # process; done here, before the first worker, so that the variables of this session's workers,
    # and so their templates' keys, do not change when a test first imports diffusers.
    import torch._dynamo  # noqa: F401

    templates = launch.Templates(unkeyed=UNKEYED)
    SESSION_TEMPLATES.append(templates)
    os.environ[launch.TEMPLATES_ENV] = str(templates.folder)
    yield templates
    os.environ.pop(launch.TEMPLATES_ENV)
    SESSION_TEMPLATES.remove(templates)
    templates.close()


@pytest.fixture
def seed_reports() -> list[Path]:
    return SEEDS


@pytest.fixture(scope="session")
def gate_residual_case_1(tmp_path_factory) -> Path:
    """The report ``audit run --op gate_residual --device cpu --case 1 --candidate diffusers`` writes
    (the references and diffusers on one row; the command in this process, its worker a process of
    its own), run once for the modules that read it: tests/cli/test_kernels.py,
    tests/cli/test_session.py and tests/adapters/test_diffusers_follows_diffusers.py. Read it;
    never change it."""
    out = tmp_path_factory.mktemp("gate_residual_case_1") / "h3_bitwise_reuse.gate_residual.json"
    argv = ["run", "--op", "gate_residual", "--device", "cpu", "--case", "1", "--candidate", "diffusers"]
    done = audit_in_process(*argv, "--out", str(out), "-q")
    assert done.returncode == 0, done.stderr
    return out


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
