"""The plugin's tests: poslab's conformance suite, and the kernel width its Gaussian fit recovers.

Run with ``pytest examples/random_fourier`` (after ``pip install ./examples/random_fourier``,
or from this folder).
"""

import numpy as np
import pytest

from poslab.analysis import fit_decay, similarity_profile
from poslab.testing import encoding_checks
from poslab_random_fourier import RandomFourier


@pytest.mark.parametrize("check", encoding_checks(RandomFourier, {"length_scale": 8.0}), ids=str)
def test_conformance(check):
    check()


def test_profile_is_the_rbf_kernel():
    table = RandomFourier(length_scale=16.0).generate(512, 2048, rng=np.random.default_rng(0))
    profile = similarity_profile(table)
    fits = fit_decay(profile.distance[1:], profile.mean_similarity[1:], n_pairs=profile.n_pairs[1:],
                     std=profile.std_similarity[1:], models=["gaussian"])
    assert fits.selected.params["sigma"] == pytest.approx(16.0, rel=0.15)
