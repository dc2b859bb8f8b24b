"""The extension's build is keyed on its sources' bytes, not their times (``_build``): a source
changed behind an older modification time (a checkout, a copy of the tree) still gets compiled."""

from __future__ import annotations

import os

import pytest

from rl_kernel_ops import _build

FLAGS = ["-O3", "-gencode=arch=compute_90a,code=sm_90a"]


def _sources(tmp_path, monkeypatch):
    csrc = tmp_path / "csrc"
    csrc.mkdir()
    (csrc / "a.cu").write_text("__global__ void k() {}\n")
    (csrc / "common.cuh").write_text("#pragma once\n")
    monkeypatch.setattr(_build, "CSRC", csrc)
    return csrc


def test_digest_follows_the_bytes_of_every_source_and_header_whatever_their_times(tmp_path, monkeypatch):
    csrc = _sources(tmp_path, monkeypatch)
    before = _build.sources_digest(FLAGS)
    assert _build.sources_digest(FLAGS) == before
    for name, text in (("a.cu", "__global__ void k() { }\n"), ("common.cuh", "#pragma once\n// x\n")):
        path = csrc / name
        original, times = path.read_text(), path.stat()
        path.write_text(text)
        os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))  # the old time, new bytes
        assert _build.sources_digest(FLAGS) != before, name
        path.write_text(original)
        assert _build.sources_digest(FLAGS) == before
    (csrc / "b.cu").write_text("")
    assert _build.sources_digest(FLAGS) != before
    (csrc / "b.cu").unlink()
    assert _build.sources_digest([*FLAGS, "-lineinfo"]) != before


def _build_dir(tmp_path, stamp: str | None):
    build = tmp_path / "build"
    build.mkdir()
    for name in (f"{_build.EXTENSION_NAME}.so", "a.cuda.o", "b.o", "build.ninja"):
        (build / name).write_text("x")
    if stamp is not None:
        (build / _build.STAMP_NAME).write_text(stamp)
    return build


def test_a_build_of_the_same_sources_is_kept(tmp_path):
    build = _build_dir(tmp_path, "d1")
    assert _build.holds_build_of(build, "d1")
    assert sorted(p.name for p in build.iterdir()) == sorted(
        [f"{_build.EXTENSION_NAME}.so", "a.cuda.o", "b.o", "build.ninja", _build.STAMP_NAME]
    )


@pytest.mark.parametrize("stamp", ["d0", None], ids=["other sources", "unstamped"])
def test_a_build_of_other_sources_or_an_unstamped_one_is_removed_for_a_full_build(tmp_path, stamp):
    build = _build_dir(tmp_path, stamp)
    assert not _build.holds_build_of(build, "d1")
    assert [p.name for p in build.iterdir()] == ["build.ninja"]
