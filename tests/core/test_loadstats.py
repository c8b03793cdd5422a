from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from core import loadstats
from core.loadstats import LoadWindow

finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)


@given(arrays(np.float64, st.tuples(st.integers(2, 6), st.integers(2, 12)), elements=finite))
def test_statistics_match_numpy_reference(x: np.ndarray) -> None:
    np.testing.assert_allclose(loadstats.means(x), x.mean(axis=1), atol=1e-9)
    np.testing.assert_allclose(loadstats.variances(x), x.var(axis=1), atol=1e-6)
    cov = loadstats.cross_covariance(x, x)
    np.testing.assert_allclose(cov, np.cov(x, bias=True), atol=1e-6)
    corr = loadstats.correlation(x)
    assert np.all(np.isfinite(corr))
    assert np.all(np.abs(corr) <= 1.0)
    ok = x.var(axis=1) >= 1e-6
    if ok.sum() >= 2:
        ref = np.corrcoef(x[ok])
        np.testing.assert_allclose(corr[np.ix_(ok, ok)], ref, atol=1e-6)


def test_correlation_conventions() -> None:
    t = np.arange(10.0)
    x = np.sin(t)
    c = loadstats.cross_correlation(x[None], np.stack([2 * x + 1, -x, np.full(10, 3.0)]))
    np.testing.assert_allclose(c[0], [1.0, -1.0, 0.0], atol=1e-12)


def test_population_variance() -> None:
    assert loadstats.variances(np.array([[1.0, 3.0]]))[0] == pytest.approx(1.0)


def test_divergent_is_mean_plus_std() -> None:
    x = np.array([[0.2, 0.4, 0.6]])
    assert loadstats.divergent(x)[0] == pytest.approx(0.4 + np.std(x))


@given(
    arrays(np.float64, st.tuples(st.integers(1, 8), st.integers(1, 6)), elements=finite),
    st.integers(1, 4),
    st.data(),
)
def test_node_series_is_sum_of_hosted(x: np.ndarray, n: int, data: st.DataObject) -> None:
    a = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=len(x), max_size=len(x))))
    ns = loadstats.node_series(x, a, n)
    for j in range(n):
        np.testing.assert_allclose(ns[j], x[a == j].sum(axis=0), atol=1e-9)


def test_pairwise_mean_correlation_single_node_is_zero() -> None:
    assert loadstats.pairwise_mean_correlation(np.ones((1, 5))) == 0.0


def test_load_window_keeps_last_k() -> None:
    w = LoadWindow(1, k=3)
    assert w.series().shape == (1, 0)
    w.push_many(np.arange(5.0)[None])
    assert w.series().tolist() == [[2.0, 3.0, 4.0]]
    with pytest.raises(ValueError, match="sample"):
        w.push(np.zeros(2))
