"""Reading, validating and atomically writing report files: every report file the commands read
goes through ``load_report`` or ``load_set``, bounded and non-blocking."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel, ValidationError

from . import schema
from .kinds import KINDS, Report, ReportSet, kind_of

# Union-member names pydantic puts into error locations; they are not JSON keys.
_PYDANTIC_STEP = re.compile(r"^(function-[a-z]+|dict|list|union|tagged-union|nullable|json-or-python)\[")
_MODEL_NAMES = {
    name
    for module in (schema, *(sys.modules[k.model.__module__] for k in KINDS.values()))
    for name, obj in vars(module).items()
    if isinstance(obj, type) and issubclass(obj, BaseModel)
}
MAX_REPORT_MB = 256  # default size limit for reading a report; the commands' --max-size raises it
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _is_key(position: int, part: object) -> bool:
    if isinstance(part, int):
        return True
    if position == 0 and part in KINDS:  # the discriminator's tag
        return False
    return part not in _MODEL_NAMES and not _PYDANTIC_STEP.match(part)


class ReportError(ValueError):
    """A report file or set that cannot be read or does not match the schema; ``problems`` lists
    each offending field as (JSON path, message), the path empty for a problem of the whole set."""

    def __init__(self, path: Path, problems: list[tuple[str, str]]):
        self.path, self.problems = path, problems
        super().__init__(f"{path}: " + "; ".join(f"{where}: {msg}" if where else msg for where, msg in problems))


def _problems(err: ValidationError) -> list[tuple[str, str]]:
    errors = err.errors()
    # An invalid case or candidate fails both union branches; the "Unavailable" branch's complaint
    # ("unavailable: field required") only hides the real one.
    real = [e for e in errors if "Unavailable" not in e["loc"]] or errors
    seen, problems = set(), []
    for e in real:
        loc = tuple(p for i, p in enumerate(e["loc"]) if _is_key(i, p))
        found = e.get("ctx", {}).get("error")
        if isinstance(found, schema.FieldError):  # a model validator named the field
            loc, e["msg"] = loc + found.loc, str(found)
        item = (schema.json_path(loc), e["msg"])
        if item not in seen:
            seen.add(item)
            problems.append(item)
    return problems


def parse_report(data: object, path: Path = Path("<report>")) -> Report:
    try:
        return Report.model_validate(data)
    except ValidationError as err:
        raise ReportError(path, _problems(err)) from None
    except RecursionError:
        raise ReportError(path, [("$", "nested too deeply to be a report")]) from None


def _read_bounded(path: Path, max_mb: float) -> bytes:
    """The bytes of a regular file of at most ``max_mb`` MiB. Opened without blocking, so a FIFO or
    a device is refused instead of read forever."""
    limit = int(max_mb * 2**20)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = (
                "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device or special file"
            )
            raise ReportError(path, [("$", f"not a regular file ({kind})")])
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ReportError(path, [("$", f"larger than the {max_mb:g} MB limit (--max-size raises it)")])
    return data


def _decode(path: Path, raw: bytes) -> object:
    """JSON text -> Python data; every way that can fail is a ReportError."""
    try:
        text = raw.decode("utf-8")
        data = json.loads(text)
        if _SURROGATE_ESCAPE.search(text):  # paired surrogates decode to characters; a lone one cannot be encoded
            json.dumps(data, ensure_ascii=False).encode("utf-8")
    except RecursionError:
        raise ReportError(path, [("$", "not JSON: nested too deeply")]) from None
    except UnicodeDecodeError as exc:
        raise ReportError(path, [("$", f"not UTF-8 text: {exc.reason} at byte {exc.start}")]) from None
    except UnicodeEncodeError:
        raise ReportError(
            path, [("$", "a string holds a lone surrogate escape (\\ud800-\\udfff), which is no character")]
        ) from None
    except ValueError as exc:  # JSONDecodeError, and integers longer than Python converts
        raise ReportError(path, [("$", f"not JSON: {exc}")]) from None
    return data


def _read(path: Path, max_mb: float) -> bytes:
    """``_read_bounded``, with every OSError a ReportError that names what went wrong."""
    try:
        return _read_bounded(path, max_mb)
    except FileNotFoundError:
        what = "a symbolic link to nothing" if path.is_symlink() else "no such file"
        raise ReportError(path, [("$", what)]) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ReportError(path, [("$", "a loop of symbolic links")]) from None
        raise ReportError(path, [("$", f"cannot read: {exc.strerror or exc}")]) from None


def load_report(path: Path, max_mb: float = MAX_REPORT_MB) -> Report:
    """Read and validate a report of any kind. Anything that is not a valid report, however
    hostile (a FIFO, a device, a file over ``max_mb`` MiB, nesting too deep, an integer too long,
    a lone surrogate, a loop of symbolic links), raises ReportError; nothing blocks and nothing
    else is raised."""
    return parse_report(_decode(Path(path), _read(Path(path), max_mb)), path)


def _report_in(path: Path, max_mb: float) -> Report | None:
    """A directory's ``*.json`` file read as ``load_report`` reads it; None for JSON whose ``kind``
    is no report kind (benchmark results, ...)."""
    data = _decode(path, _read(path, max_mb))
    return parse_report(data, path) if isinstance(data, dict) and data.get("kind") in KINDS else None


def _reports_in(directory: Path, max_mb: float) -> list[tuple[Path, Report]]:
    """The reports among a directory's ``*.json`` files (``_report_in``)."""
    found = [(path, _report_in(path, max_mb)) for path in sorted(directory.glob("*.json"))]
    return [(path, report) for path, report in found if report is not None]


def load_set(path: Path, max_mb: float = MAX_REPORT_MB) -> ReportSet:
    """The reports in a file or a directory (its ``*.json`` files whose ``kind`` is a report kind),
    keyed by their kind's key, for ``reports.diff``. Every file is read bounded and without
    blocking; a file that cannot be read or is not JSON, an invalid report, a directory without a
    report, or two reports with one key raise ReportError."""
    path = Path(path)
    try:
        is_dir = stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        is_dir = False  # load_report says why
    if not is_dir:
        report = load_report(path, max_mb)
        return {kind_of(report).key(report.root): (path, report)}
    found: ReportSet = {}
    for file, report in _reports_in(path, max_mb):
        key = kind_of(report).key(report.root)
        if key in found:
            both = f"{found[key][0].name} and {file.name} are both {key[0]} reports for {key[1]}"
            raise ReportError(path, [("", f"{both}: give one of them")])
        found[key] = (file, report)
    if not found:
        raise ReportError(path, [("", "no report in this directory")])
    return found


def load_each(paths: list[Path], max_mb: float = MAX_REPORT_MB) -> tuple[list[tuple[Path, Report]], list[ReportError]]:
    """Every report in ``paths`` (files, and directories' ``*.json`` files whose ``kind`` is a
    report kind), each read as ``load_report`` reads it, and one ReportError per file that could not
    be read or is no valid report (and per directory without a report), so that one bad file does
    not hide the others. Reports of any kind and with any key may appear together."""
    found: list[tuple[Path, Report]] = []
    problems: list[ReportError] = []
    for path in map(Path, paths):
        if not path.is_dir():
            try:
                found.append((path, load_report(path, max_mb)))
            except ReportError as exc:
                problems.append(exc)
            continue
        before = len(found)
        for file in sorted(path.glob("*.json")):
            try:
                report = _report_in(file, max_mb)
            except ReportError as exc:
                problems.append(exc)
                continue
            if report is not None:
                found.append((file, report))
        if len(found) == before and not any(p.path.parent == path for p in problems):
            problems.append(ReportError(path, [("", "no report in this directory")]))
    return found, problems


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (temporary file, fsync, rename), so an
    interrupted command never leaves a half-written file. The file gets the mode a new file gets
    under the umask (0644 under the usual 022), not the temporary file's 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_report(path: Path, data: dict) -> Report:
    """Validate ``data`` and write it to ``path`` atomically (``write_text``)."""
    report = parse_report(data, path)
    write_text(path, report.model_dump_json(indent=2) + "\n")
    return report
