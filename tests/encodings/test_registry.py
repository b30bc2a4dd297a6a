import dataclasses
import importlib.metadata
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from poslab.encodings import Encoding, available_encodings, get_encoding_class, register, unregister
from poslab.encodings import registry

EXAMPLE = Path(__file__).parents[2] / "examples" / "random_fourier"


@pytest.fixture
def plugin_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    yield
    unregister("random_fourier")
    sys.modules.pop("poslab_random_fourier", None)


def test_clash_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        @register
        @dataclasses.dataclass(frozen=True)
        class Fake(Encoding):
            kind = "sinusoidal"
    assert get_encoding_class("sinusoidal").__module__ == "poslab.encodings.sinusoidal"


def test_parameter_named_like_a_column_is_refused():
    with pytest.raises(ValueError, match="distance"):
        @register
        @dataclasses.dataclass(frozen=True)
        class Bad(Encoding):
            kind = "bad"
            distance: int = 1
    assert "bad" not in available_encodings()


def test_unknown_kind_lists_installed():
    with pytest.raises(KeyError, match=r"installed kinds: (\w+, )*learned, (\w+, )*random, rotary, (\w+, )*sinusoidal"):
        get_encoding_class("no_such_kind")


def _fake_entry_points(monkeypatch, *eps):
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group=None: [e for e in eps if e.group == group])


def test_entry_point_plugin_registers_and_broken_one_is_skipped(monkeypatch, plugin_path):
    good = importlib.metadata.EntryPoint("random_fourier", "poslab_random_fourier:RandomFourier", "poslab.encodings")
    broken = importlib.metadata.EntryPoint("broken", "no_such_module_xyz:Thing", "poslab.encodings")
    _fake_entry_points(monkeypatch, good, broken)
    with pytest.warns(RuntimeWarning, match="skipping poslab encoding plugin 'broken'"):
        registry.load_entry_points(force=True)
    assert "random_fourier" in available_encodings() and "broken" not in available_encodings()


def test_example_plugin_runs_inside_a_study(plugin_path):
    import poslab_random_fourier  # noqa: F401  (registers on import)
    from poslab.study import load_study, run_study

    spec = load_study(EXAMPLE / "study.toml")
    result = run_study(spec, progress=False)
    s = result.summary
    assert (s["status"] == "ok").all()
    rff = result.decay_metrics[(result.decay_metrics["kind"] == "random_fourier") & (result.decay_metrics["model"] == "gaussian")
                               & (result.decay_metrics["target"] == "profile")]
    # the RBF kernel of width length_scale: the Gaussian fit recovers it
    for (ls, seed), g in rff.groupby(["length_scale", "seed"]):
        assert g["status"].item() == "ok"
        assert g["sigma"].item() == pytest.approx(ls, rel=0.15)


def test_parameters_named_like_summary_columns_are_refused():
    for name in ("center", "max_distance", "band_width_0p5"):
        namespace = {"__annotations__": {name: float}, name: 1.0, "kind": "bad2"}
        cls = dataclasses.dataclass(frozen=True)(type("Bad2", (Encoding,), namespace))
        with pytest.raises(ValueError, match=name):
            register(cls)


def test_metric_and_block_length_parameters_are_refused_naming_their_tables():
    """The bug the schema fixes: these registered fine, then properties.csv had two metric columns and the
    summary's block_length was overwritten."""
    with pytest.raises(ValueError) as info:
        @register
        @dataclasses.dataclass(frozen=True)
        class Clash(Encoding):
            kind = "clash"
            metric: str = "cosine"
            block_length: int = 16
    message = str(info.value)
    assert "metric (a column of properties.csv, grid_profiles.csv)" in message
    assert "block_length (a column of summary.csv)" in message
    assert "clash" not in available_encodings()


def test_every_declared_column_is_reserved():
    from poslab.stages import TABLES, reserved_columns

    reserved = reserved_columns()
    for table in TABLES.values():
        for col in table.columns:
            assert table.name in reserved[col.title]
    assert reserved["decay_length_ci_low"] == ("summary", "decay_metrics")
    assert reserved["value_ci_low"] == ("window_sensitivity", "comparison")


def test_example_plugin_passes_the_conformance_suite(plugin_path):
    from poslab_random_fourier import RandomFourier

    from poslab.testing import check_encoding

    check_encoding(RandomFourier, {"length_scale": 8.0})


def test_example_plugins_own_tests_pass(plugin_path):
    """examples/random_fourier/test_random_fourier.py, run here so that what the example shows stays true."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("example_tests", EXAMPLE / "test_random_fourier.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for check in module.encoding_checks(module.RandomFourier, {"length_scale": 8.0}):
        module.test_conformance(check)
    module.test_profile_is_the_rbf_kernel()
