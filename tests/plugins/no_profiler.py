"""Test double for a process whose profiler cannot start (loaded through $AUDIT_PLUGINS): importing
it replaces ``torch.profiler.profile`` with one that raises, as a build whose profiler backend fails
would. A real build without a working profiler cannot be had on demand."""

import torch.profiler


class _Broken:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("planted: the profiler cannot start")


torch.profiler.profile = _Broken
