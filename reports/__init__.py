"""Report schema (pydantic), reading and writing, verdicts, diffs and rendering."""

from . import schema  # noqa: F401  (first: the report kinds in other modules build on its models)
