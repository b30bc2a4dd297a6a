"""KERPLE's log and power kernels (Chi et al. 2022) as attention priors."""

import math

import numpy as np
import pytest

from poslab.encodings import make_encoding
from poslab.stages import run_stage


def test_log_kernel_is_a_power_law_prior():
    p, a = 1.5, 0.3
    k = make_encoding("kerple", p=p, a=a).kernel(2000, 1999, 1)
    d = np.arange(2000)
    np.testing.assert_allclose(k.backward[0], (1 + a * d) ** -p, rtol=1e-13)
    below = run_stage("kernel", make_encoding("kerple", p=p, a=a), 2000).tables["kernel_heads"]
    # (1 + a k)^(-p) < 1/e  <=>  k > (e^(1/p) - 1) / a ;  < 1/2  <=>  k > (2^(1/p) - 1) / a
    assert below["below_1e"].iloc[0] == math.floor((math.exp(1 / p) - 1) / a) + 1
    assert below["below_half"].iloc[0] == math.floor((2 ** (1 / p) - 1) / a) + 1


def test_power_kernel_with_exponent_one_is_alibi():
    kerple = make_encoding("kerple", variant="power", p=0.0625, a=1.0).kernel(300, 299, 1)
    alibi = make_encoding("alibi", n_heads=4).kernel(300, 299, 1)
    np.testing.assert_allclose(kerple.backward[0], alibi.backward[1], rtol=1e-13)  # head 1's slope is 1/16
    d = np.arange(300)
    np.testing.assert_allclose(make_encoding("kerple", variant="power", p=0.2, a=1.5).kernel(300, 299, 1).backward[0],
                               np.exp(-0.2 * d**1.5), rtol=1e-13)


def test_parameters_are_checked():
    with pytest.raises(ValueError, match=r"0 < a <= 2"):
        make_encoding("kerple", variant="power", a=2.5)
    with pytest.raises(ValueError, match="p must be"):
        make_encoding("kerple", p=0.0)
    assert make_encoding("kerple", variant="log", a=5.0).a == 5.0  # the log kernel takes any a > 0
