"""The backward variants of the tree of tiledx_attempt.diff (run with that tree first on PYTHONPATH and
PYTHONSAFEPATH=1), each timed and its bits compared with the split pair's (../rows_overlap/probe_overlap.py):
2 the overlapped kernel; 3 to 6 the tile-dx kernel with every dx, a half, two thirds or a third of
them in the tile blocks; 7 and 8 the two-group blocks at 4 and 3 blocks per SM; 11 the sliced kernel's
first form. Sizes, then name=variant pairs:

    python probe_tiledx.py 1024,4097 overlapped=2,tdx_all=3
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path("docs/evidence/h200/rows_overlap").resolve()))
from probe_overlap import probe  # noqa: E402

import rl_kernel_ops  # noqa: E402

print("rl_kernel_ops from", rl_kernel_ops.__file__, flush=True)
probe(sys.argv[1], tuple((n, int(v)) for n, v in (s.split("=") for s in sys.argv[2].split(","))))
