"""The ``audit`` command line: can an existing library kernel be reused bit for bit?

``app`` (``audit.cli.app``) with every command registered: importing a command module registers it.
The commands parse, check (``checks``) and print; the work is in ``audit.parent`` and the
computing-and-writing skeleton in ``session``. Importing this package loads no torch.
"""

from audit.cli import run, chain, trajectory, parallel, reports, environments, selftest  # noqa: F401  (registers the commands)
from audit.cli.app import app

__all__ = ["app"]
