"""The one retry delay: doubling from `first`, capped, reset by a success, jitter in bounds.

That it imports nothing of ours is an import rule (docs/import_graph.py).
"""

from __future__ import annotations

from retrypolicy import Backoff


def test_delays_double_up_to_the_cap_and_start_over_after_a_reset() -> None:
    backoff = Backoff(0.5, 3.0)
    assert [backoff.next() for _ in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    backoff.reset()
    assert backoff.next() == 0.5


def test_jitter_stays_within_half_and_all_of_the_delay() -> None:
    assert Backoff(1.0, 8.0, rng=lambda: 0.0).next() == 0.5
    high = Backoff(1.0, 8.0, rng=lambda: 0.999)
    delays = [high.next() for _ in range(6)]
    assert all(0.5 * d <= j <= d for j, d in zip(delays, [1, 2, 4, 8, 8, 8], strict=True))
    assert Backoff.delay(3, 1.0, 30.0) == 4.0
