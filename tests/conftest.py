from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def gpt2_table():
    from poslab.encodings import make_encoding

    return make_encoding("learned", source="gpt2").generate(1024, 768)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
