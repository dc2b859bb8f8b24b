"""The tree of .dev/exp (run with PYTHONPATH=.dev/exp first, PYTHONSAFEPATH=1): the overlapped
backward built for 6 (variant 2), 7 (3) and 8 (4) blocks per SM, each with its bits against the
split pair."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path("docs/evidence/h200/rows_overlap").resolve()))
from probe_overlap import probe  # noqa: E402

import rl_kernel_ops  # noqa: E402

print("rl_kernel_ops from", rl_kernel_ops.__file__, flush=True)
probe(sys.argv[1], (("overlapped", 2), ("min7", 3), ("min8", 4)))
