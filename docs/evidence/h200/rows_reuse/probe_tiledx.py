"""The tree of .dev/inb (PYTHONPATH=.dev/inb first, PYTHONSAFEPATH=1): the overlapped backward
(variant 2) against the tile-dx kernel (3: every dx in the tile blocks; 4: half; 5: two thirds;
6: one third), each with its bits against the split pair."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path("docs/evidence/h200/rows_overlap").resolve()))
from probe_overlap import probe  # noqa: E402

import rl_kernel_ops  # noqa: E402

print("rl_kernel_ops from", rl_kernel_ops.__file__, flush=True)
probe(sys.argv[1], tuple((n, int(v)) for n, v in (s.split("=") for s in sys.argv[2].split(","))))
