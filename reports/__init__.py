"""Report kinds (``reports.kinds``), reading and writing (``reports.io``), verdicts, diffs and rendering."""
