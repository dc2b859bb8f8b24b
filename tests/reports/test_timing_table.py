"""The timing table of ``audit show --timing``: one row per mode, the unaccounted time last."""

from reports.schema import ProcessTiming, Timing
from reports.tables import timing_section


def unaccounted(wall: float, phases: dict[str, float]) -> tuple[str, str]:
    """The unaccounted cell of a one-mode timing block: its text and its status."""
    timing = Timing(modes={"plain": ProcessTiming(processes=1, wall=wall, phases=phases)})
    (row,) = timing_section(timing).rows
    return row[-1].text, row[-1].status


def test_phases_a_rounding_over_the_wall_time_show_no_negative_zero():
    assert unaccounted(3.62, {"imports": 1.71, "compute": 1.91 + 1e-9}) == ("0.00", "plain")


def test_time_no_phase_accounts_for_is_shown_and_marked_bad_past_five_percent():
    assert unaccounted(10.0, {"compute": 9.6}) == ("0.40", "plain")
    assert unaccounted(10.0, {"compute": 8.0}) == ("2.00", "bad")
