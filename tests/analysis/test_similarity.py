import numpy as np
import pytest

from poslab.analysis import cosine_similarity, unit_rows
from poslab.analysis.similarity import InvalidPositionsWarning


def test_unit_rows_of_huge_entries_do_not_overflow():
    """Rows whose squared norm overflows float64 still normalise exactly."""
    u = unit_rows(np.array([[1e200, 1e200], [2e200, 0.0], [3e200, 4e200]]))
    np.testing.assert_allclose(u.vectors, [[2**-0.5, 2**-0.5], [1, 0], [0.6, 0.8]], rtol=1e-15)
    assert u.valid.all()


def test_cosine_similarity_equals_the_definition_with_invalid_rows_excluded():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(7, 5))
    x[2] = 0.0
    x[4, 1] = np.inf
    with pytest.warns(InvalidPositionsWarning, match=r"2 of 7 positions .*\[2, 4\]"):
        s = cosine_similarity(x)
    for i in range(7):
        for j in range(7):
            if {i, j} & {2, 4}:
                assert np.isnan(s[i, j])
            else:
                want = x[i] @ x[j] / np.linalg.norm(x[i]) / np.linalg.norm(x[j])
                assert s[i, j] == pytest.approx(want, abs=1e-15)
