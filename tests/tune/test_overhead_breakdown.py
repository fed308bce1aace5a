"""studies/overhead.py's split of slot time: every second of slots x span lands in exactly one part."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "studies"))

from overhead import TrialTimes, breakdown  # noqa: E402


def test_slot_time_splits_into_epochs_waits_gaps_and_idle_slots():
    trials = [
        # slot 1: starts at 0, results received at 1.5 and 2.6 (epochs of 1.0 s each), ends at 2.8
        TrialTimes(0.0, 2.8, [(1.5, 1.0), (2.6, 1.0)]),
        # slot 2: starts at 0.2, one epoch of 2.0 received at 2.4, ends at 2.5
        TrialTimes(0.2, 2.5, [(2.4, 2.0)]),
        # next in the slot that freed last (slot 1, at 2.8): epochs of 1.0 received at 4.2 and 5.3
        TrialTimes(3.0, 5.5, [(4.2, 1.0), (5.3, 1.0)]),
    ]
    parts = breakdown(trials, slots=2)
    assert parts.epochs == pytest.approx(6.0)
    assert parts.to_first_result == pytest.approx(0.5 + 0.2 + 0.2)
    assert parts.between_results == pytest.approx(0.1 + 0.1)
    assert parts.after_last_result == pytest.approx(0.2 + 0.1 + 0.2)
    assert parts.between_trials == pytest.approx(0.2)  # 2.8 -> 3.0 in slot 1
    # slot 2 idle from 0 to 0.2 and from 2.5 to the end, 5.5: 3.2 s of the 2 x 5.5 s
    assert parts.idle == pytest.approx(3.2)
    total = sum(vars(parts).values())
    assert total == pytest.approx(2 * 5.5)
