import contextlib

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


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("excluded", [False, True])
def test_unit_rows_in_place_are_the_same_quotients_and_the_public_function_leaves_its_input(center, excluded):
    """``_unit_rows(overwrite=True)`` (a run's released table) divides in the caller's array, bit for bit the
    values of :func:`unit_rows`, which never writes into its input (centred: into its own centred copy)."""
    from poslab.analysis.similarity import _unit_rows

    x = np.random.default_rng(4).normal(size=(50, 6)) * 3.0 + 1.0
    if excluded:
        x[[3, 20]] = 0.0
        x[7, 2] = np.nan
    before = x.copy()
    with pytest.warns(InvalidPositionsWarning) if excluded else contextlib.nullcontext():
        expected = unit_rows(x, center=center)
    np.testing.assert_array_equal(x, before)  # the public function: input untouched
    with pytest.warns(InvalidPositionsWarning) if excluded else contextlib.nullcontext():
        got = _unit_rows(x, center=center, overwrite=True)
    np.testing.assert_array_equal(got.vectors, expected.vectors)
    np.testing.assert_array_equal(got.valid, expected.valid)
    assert np.shares_memory(got.vectors, x) != center  # centred: the centred copy is divided, not the table


def test_unit_rows_split_between_threads_by_rows_give_the_same_bits(monkeypatch):
    """The row-wise passes (finite check, norms, division) in runs of rows on several threads: the same rows."""
    from poslab import _threads
    from poslab.analysis import similarity

    table = np.random.default_rng(2).standard_normal((999, 7))
    table[[3, 500]] = 0.0
    table[10, 2] = np.nan
    monkeypatch.setattr(similarity, "_ROW_ENTRIES", 50)  # 143 runs of 7 rows
    got = []
    for threads in (1, 3):
        monkeypatch.setattr(_threads, "_limit", threads)
        for center in (False, True):
            with pytest.warns(similarity.InvalidPositionsWarning):
                units = similarity.unit_rows(table, center=center)
            got.append((units.vectors, units.valid))
        got.append(similarity._unit_rows(np.delete(table, [3, 10, 500], axis=0), overwrite=True).vectors)
    monkeypatch.setattr(similarity, "_ROW_ENTRIES", 2**20)  # one run
    with pytest.warns(similarity.InvalidPositionsWarning):
        whole = similarity.unit_rows(table)
    for (a, va), (b, vb) in zip(got[:2], got[3:5]):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(va, vb)
    np.testing.assert_array_equal(got[2], got[5])
    np.testing.assert_array_equal(got[0][0], whole.vectors)
