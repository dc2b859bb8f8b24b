"""The tree of throttle_attempt.diff: the overlapped backward with its dx blocks held within
4/8/16/32 rows of their tile's partial blocks (variants 3-6), beside the unthrottled overlapped
kernel (2) and the fused one (1); each with its bits against the split pair. Run from the
repository root: python docs/evidence/h200/rows_throttle/probe_window.py 1024,2048,4097,6144"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path("docs/evidence/h200/rows_overlap").resolve()))
from probe_overlap import probe  # noqa: E402

probe(
    sys.argv[1],
    (("fused", 1), ("overlapped", 2), ("window4", 3), ("window8", 4), ("window16", 5), ("window32", 6)),
)
