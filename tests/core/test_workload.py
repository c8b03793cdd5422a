"""Key distributions averaged for the controller's static model."""

from __future__ import annotations

import numpy as np


def test_mean_key_group_shares_of_a_long_wavy_run_are_quick_and_close() -> None:
    """A month of 4 s wave steps averages a seeded sample of its epochs: quick, and within a
    few percent of the exact average over whole periods (the waves cancel)."""
    import time

    from core.keyspace import KeySpec, KeyWaves
    from core.workload import mean_key_group_shares

    k = KeySpec(space=4000, distribution="zipf", s=0.6)
    wavy = k.model_copy(update={"waves": KeyWaves(classes=2, period_s=40, depth=0.8, step_s=4)})
    t0 = time.perf_counter()
    month = mean_key_group_shares(wavy, 16, 30 * 86400.0)
    assert time.perf_counter() - t0 < 10.0  # not 648,000 epochs one by one (a minute)
    exact = mean_key_group_shares(wavy, 16, 400.0)  # ten whole periods: exact average
    assert np.allclose(month, exact, rtol=0.1), (month, exact)
    assert abs(month.sum() - 1.0) < 1e-9
