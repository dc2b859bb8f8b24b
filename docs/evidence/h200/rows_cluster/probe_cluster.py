"""norm_modulate's backward kernels side by side at several S, on the tree of
clustered_attempt.diff (variant 3 exists only there; run from the repository root): the probe of
../rows_overlap/ (the split pair's time, then each variant's time and whether its dx and partials
have the split pair's bits) with the clustered kernel (3) beside the fused kernel (1), the
overlapped kernel (2) and norm_modulate_bwd's own choice (0). Calls 1 and 2 ran the same loop
written out in this file; call 1's had a fifth column, the first form's two vectors per thread.

    python docs/evidence/h200/rows_cluster/probe_cluster.py 1024,4097,32768
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "rows_overlap"))
from probe_overlap import probe  # noqa: E402

VARIANTS = (("fused", 1), ("overlapped", 2), ("clustered", 3), ("chosen", 0))

if __name__ == "__main__":
    probe(sys.argv[1], VARIANTS)
