"""Where reports and pictures go: ``--out`` checked before any computation, so a bad path ends the
command with one line and status 2 instead of losing a finished run.

A path ending in the file's suffix (``.json`` for reports, ``.png`` for plots) is a file; anything
else is a directory. A symbolic link at the file's place is written through (its target gets the
file), never replaced by a regular file.
"""

from __future__ import annotations

import tempfile
from pathlib import Path


class OutputPathError(ValueError):
    """``--out`` cannot receive what the command would write; the message says why, in one line."""


def _writable_dir(directory: Path) -> None:
    """Raise unless files can be created in ``directory`` or, when it does not exist yet, in its
    nearest existing ancestor (which must be a directory)."""
    existing = directory
    while not existing.exists() and not existing.is_symlink() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise OutputPathError(f"{existing} is not a directory")
    try:  # a real probe: permissions, read-only mounts and /proc all answer the same way
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise OutputPathError(f"cannot write in {existing}: {exc.strerror or exc}") from None


def file_target(path: Path, suffix: str) -> Path:
    """The file to write for ``--out path``: ``path`` itself, or the target of the symbolic link
    at ``path``. Raises OutputPathError when its name does not end in ``suffix``, when it is a
    directory or something else that is not a regular file, or when its directory is not writable."""
    if path.suffix != suffix:
        raise OutputPathError(f"{path}: the file name must end in {suffix}")
    target = path.resolve() if path.is_symlink() else path
    if target.is_dir():
        raise OutputPathError(f"{path} is a directory; give a file name ending in {suffix} or a new path")
    if target.exists() and not target.is_file():
        raise OutputPathError(f"{path} exists and is not a regular file")
    _writable_dir(target.parent)
    return target


def report_paths(out: Path | None, ops: list[str], kind: str) -> dict[str, Path]:
    """op -> the report file it is written to. ``out`` is a ``.json`` file (one op only) or a
    directory (default ``audit-reports``), where each op's report is ``KIND.OP.json``."""
    if out is None:
        out = Path("audit-reports")
    if out.suffix == ".json":
        if len(ops) > 1:
            raise OutputPathError(f"{len(ops)} ops write {len(ops)} reports: give a directory, not {out}")
        return {ops[0]: file_target(out, ".json")}
    if out.exists() and not out.is_dir():
        raise OutputPathError(f"{out} exists and is not a directory")
    if not out.exists() and out.suffix:
        raise OutputPathError(f"{out}: a report file must end in .json, and a new directory must have no suffix")
    _writable_dir(out)
    return {op: file_target(out / f"{kind}.{op}.json", ".json") for op in ops}
