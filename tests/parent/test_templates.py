"""The worker templates (``audit.parent.launch.Templates``, ``audit.worker.template``): a worker
forked from one is the process a new interpreter would have been (arguments, directory, variables,
descriptors, session, exit status), it is stopped the same way, and it computes the same report."""

import json
import os
import resource
import signal
import sys
import time
from pathlib import Path

import pytest

from audit.parent import launch
from tests.helpers import REPO, alive, audit_in_process, load

PROBE = "tests.plugins.forked_probe"


@pytest.fixture
def templates():
    own = launch.Templates(start_on=1)
    yield own
    own.close()


def _launch(
    how: launch.Templates | None, folder: Path, action: str, variables: dict, pass_fds: tuple = ()
) -> tuple[launch.Launched, Path]:
    """The probe doing ``action``, forked from ``how`` or (None) started as a new interpreter."""
    out, log = folder / f"seen-{action}.json", folder / f"{action}.log"
    argv = ["-m", PROBE, str(out), action]
    if how is None:
        return launch.start(argv, variables=variables, log=log, pass_fds=pass_fds), out
    forked = how.fork(PROBE, argv[2:], variables=variables, python=sys.executable, log=log, pass_fds=pass_fds)
    assert forked is not None, "the template refused"
    return forked, out


def _fork(templates: launch.Templates, variables: dict, log: Path) -> launch.Launched | None:
    """``templates.fork`` of the probe (writing beside ``log``), for the tests that ask whether it forks."""
    argv = [str(log.with_suffix(".json")), "return"]
    return templates.fork(PROBE, argv, variables=variables, python=sys.executable, log=log, pass_fds=())


def _seen(out: Path, folder: Path) -> dict:
    seen = json.loads(out.read_text())
    seen["argv"][1] = seen["argv"][1].replace(str(folder), "FOLDER")
    seen["environ"].pop(launch.MARKER)
    return seen


@pytest.mark.parametrize("action, code", [("return", 0), ("exit-3", 3), ("raise", 1)])
def test_a_forked_worker_is_the_process_a_new_interpreter_would_be(templates, tmp_path, action, code):
    variables = {**os.environ, "PROBE_VARIABLE": "forked"}
    keep_read, passed = os.pipe()
    try:
        seen = {}
        for how, name in ((None, "new"), (templates, "forked")):
            (tmp_path / name).mkdir()
            launched, out = _launch(how, tmp_path / name, action, variables, pass_fds=(passed,))
            assert launched.wait(time.monotonic() + 120) == code, launched.tail()
            seen[name] = _seen(out, tmp_path / name)
            assert f"probe {action}" in launched.tail()
            assert ("ValueError: planted by forked_probe" in launched.tail()) == (action == "raise")
    finally:
        os.close(keep_read)
        os.close(passed)
    assert seen["forked"] == seen["new"]
    forked = seen["forked"]
    assert Path(forked["argv"][0]) == REPO / "tests" / "plugins" / "forked_probe.py"
    assert forked["cwd"] == str(REPO) and forked["session_leader"] and forked["stdin"] == ""
    assert forked["environ"] == variables
    assert {0, 1, 2, passed} <= set(forked["fds"]) and len(set(forked["fds"]) - {0, 1, 2, passed}) <= 1


def test_one_template_serves_the_workers_of_one_set_of_variables_from_the_second_on(tmp_path):
    own = launch.Templates()
    log = tmp_path / "first.log"
    try:
        assert _fork(own, dict(os.environ), log) is None and not own.started, (
            "the first worker of a key starts as a new interpreter"
        )
        for i, plugins in enumerate(["tests.plugins.a", "tests.plugins.b"]):  # an unkeyed variable
            (tmp_path / str(i)).mkdir()
            launched, out = _launch(own, tmp_path / str(i), "return", {**os.environ, "AUDIT_PLUGINS": plugins})
            assert launched.wait(time.monotonic() + 120) == 0
            assert json.loads(out.read_text())["environ"]["AUDIT_PLUGINS"] == plugins
        assert len(own.started) == 1
        assert _fork(own, {**os.environ, "OTHER": "x"}, log) is None
        client = launch.Templates(own.folder, start_on=None)  # a command run with $AUDIT_TEMPLATES
        (tmp_path / "client").mkdir()
        launched, out = _launch(client, tmp_path / "client", "return", dict(os.environ))
        assert launched.wait(time.monotonic() + 120) == 0 and out.exists()
        for _ in range(2):  # the owner would start a template for the second
            assert _fork(client, {**os.environ, "OTHER": "y"}, log) is None
        assert len(own.started) == 1 and not client.started, "a client starts no template"
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft - 1, hard))
        try:  # a new interpreter would inherit the lower limit, a forked worker the template's
            assert _fork(client, dict(os.environ), log) is None
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    finally:
        own.close()


def test_a_variable_the_owner_declares_unkeyed_is_the_workers_own_also_through_a_client(tmp_path):
    """A template started for a worker with one TMPDIR forks workers with others, each with its own
    temporary directory; a command run with $AUDIT_TEMPLATES reads the owner's declaration."""
    own = launch.Templates(start_on=1, unkeyed=("TMPDIR",))
    try:
        for name in ("first", "second", "client"):
            folder = tmp_path / name
            (folder / "tmp").mkdir(parents=True)
            how = launch.Templates(own.folder, start_on=None) if name == "client" else own
            launched, out = _launch(how, folder, "return", {**os.environ, "TMPDIR": str(folder / "tmp")})
            assert launched.wait(time.monotonic() + 120) == 0, launched.tail()
            seen = json.loads(out.read_text())
            assert seen["environ"]["TMPDIR"] == seen["tempdir"] == str(folder / "tmp"), name
        assert len(own.started) == 1
    finally:
        own.close()


def test_a_forked_worker_is_killed_with_its_tree_and_close_ends_every_template(tmp_path):
    own = launch.Templates(start_on=1)
    hanging, _ = _launch(own, tmp_path, "hang", dict(os.environ))
    template_pids = [template[0].popen.pid for template in own.started.values()]
    assert alive(hanging.popen.pid) and all(map(alive, template_pids))
    hanging.kill()
    assert hanging.popen.returncode == -signal.SIGKILL and not alive(hanging.popen.pid)
    assert launch.ended(hanging.popen.returncode) == "was killed by SIGKILL"
    (tmp_path / "later").mkdir()
    left, _ = _launch(own, tmp_path / "later", "hang", dict(os.environ))
    own.close()  # SIGKILL for each; a big process may take a moment to die on a busy machine
    deadline = time.monotonic() + 10
    while any(map(alive, [left.popen.pid, *template_pids])) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(left.popen.pid) and not any(map(alive, template_pids))


def test_a_template_that_cannot_import_diffusers_refuses_and_says_why_in_its_log(tmp_path):
    """``start`` then starts the worker as a new interpreter (``fork`` gave None)."""
    broken = tmp_path / "site" / "diffusers"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('planted: a broken diffusers')\n")
    variables = {**os.environ, "PYTHONPATH": f"{tmp_path / 'site'}:{REPO}"}
    own = launch.Templates(start_on=1)
    try:
        log = tmp_path / "log"
        assert _fork(own, variables, log) is None
        assert list(own.started.values()) == [None] and not log.exists()
        assert "ImportError: planted: a broken diffusers" in next(own.folder.glob("*.log")).read_text()
    finally:
        own.close()


def test_workers_forked_from_templates_write_the_report_new_interpreters_write(templates, tmp_path):
    """The same command twice in this process, its worker a new interpreter, then forked from a
    template (a variable of the test's own in ``env`` keeps the session's templates out)."""
    argv = ["run", "--op", "gate_residual", "--device", "cpu", "--case", "1", "--candidate", "diffusers", "-q"]
    env = {"FORKED_OR_NEW": str(tmp_path)}
    done = audit_in_process(*argv, "--out", str(tmp_path / "new.json"), env=env)
    assert done.returncode == 0, done.stderr
    with templates.serving():
        done = audit_in_process(*argv, "--out", str(tmp_path / "forked.json"), env=env)
    assert done.returncode == 0, done.stderr
    assert len(templates.started) == 1
    new, forked = load(tmp_path / "new.json"), load(tmp_path / "forked.json")
    for key in ("inputs_sha256", "kernel_names", "results", "environment"):
        assert forked[key] == new[key], key
    imports = [report["timing"]["modes"]["plain"]["phases"]["imports"] for report in (forked, new)]
    assert imports[0] < imports[1] / 2, imports
