"""``audit selftest`` passes with the real comparator and fails when the comparator is broken on
purpose (a plugin that makes it blind to the last mantissa bit)."""

from tests.helpers import audit


def test_the_selftest_holds_with_the_real_comparator():
    done = audit("selftest")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("selftest: ") and last.endswith(" properties hold")
    assert "MISSED" not in done.stdout and "sign bit flipped" in done.stdout and "3 ULPs off" in done.stdout


def test_the_selftest_fails_when_the_comparator_ignores_the_last_mantissa_bit():
    done = audit("selftest", env={"AUDIT_PLUGINS": "tests.plugins.blunt_comparator"})
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    missed = [line for line in done.stdout.splitlines() if line.startswith("MISSED")]
    assert missed and all("last mantissa bit flipped" in line or "sign bit" in line or "ULP" in line for line in missed)
    assert any("out.0: last mantissa bit flipped" in line for line in missed)
    assert "missed" in done.stdout.strip().splitlines()[-1]
