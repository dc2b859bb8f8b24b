"""A model of one block of the sliced backward (call4_sliced_attempt.diff, with its dx-row counter
corrected): the bulk copies it arms, the waits it makes and the rows it takes, for every column-block
count up to 16, every block m and every tile of 1 to 64 rows. It checks that every wait has one armed
copy of the row it expects, that no slot is armed twice, that nothing is in flight at the end, and that
the block computes the dx of exactly the rows j % col_blocks == m. With `--as-run`, the counter starts at
m as in the kernel that ran in call 4, and the model fails.

    python docs/evidence/h200/rows_reuse/model_sliced.py [--as-run]
"""

import sys

SLOTS = 8
AS_RUN = "--as-run" in sys.argv


def run(cb, m, count):
    slot_q = {s: [] for s in range(SLOTS)}
    row_q = []

    def load_slice(j, s):
        assert not slot_q[s], "slot armed twice"
        slot_q[s].append(j)

    def load_row(j):
        assert not row_q, "row armed twice"
        row_q.append(j)

    for i in range(min(SLOTS, count)):
        load_slice(i, i)
    if m < count:
        load_row(m)
    slot, phase = 0, (m if AS_RUN else (cb - m) % cb)
    done = []
    for j in range(count):
        assert slot_q[slot], f"wait on unarmed slot at j={j}"
        assert slot_q[slot].pop(0) == j
        dx_here = phase == 0
        if dx_here:
            assert row_q, f"wait on unarmed row at j={j}"
            assert row_q.pop(0) == j
            done.append(j)
        if j + SLOTS < count:
            load_slice(j + SLOTS, slot)
        if dx_here and j + cb < count:
            load_row(j + cb)
        slot = (slot + 1) % SLOTS
        phase = (phase + 1) % cb
    assert not row_q and not any(slot_q.values()), "loads left in flight"
    assert done == [j for j in range(count) if j % cb == m]


n = 0
for cb in range(1, 17):
    for m in range(cb):
        for count in range(1, 65):
            run(cb, m, count)
            n += 1
print("ok", n)
