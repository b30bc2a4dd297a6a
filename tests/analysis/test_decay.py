"""Tests for poslab.analysis.decay (cases C11 and C12 of shared/cases/README.md)."""

import math
import warnings
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from poslab.analysis import decay
from poslab.analysis.decay import DECAY_MODELS, DecayFits, fit_decay

# One row per built-in model with example parameters (scipy.stats style):
# adding a model means adding a row here.
EXAMPLES = {
    "exponential": {"amplitude": 0.6, "length": 40.0, "asymptote": 0.2},
    "gaussian": {"amplitude": 0.7, "sigma": 60.0, "asymptote": 0.1},
    "power_law": {"amplitude": 0.8, "exponent": 0.3, "asymptote": 0.05},  # decay length e^(1/0.3) - 1 = 27
    "stretched_exponential": {"amplitude": 0.6, "length": 50.0, "stretch": 0.6, "asymptote": 0.2},
    "damped_cosine": {"amplitude": 0.7, "length": 150.0, "period": 90.0, "asymptote": 0.1},
    "log_law": {"intercept": 0.95, "slope": 0.1},
}
LENGTH_LIKE = {"length", "sigma", "period"}  # scale with the distance step
MONOTONE = ["exponential", "gaussian", "power_law", "stretched_exponential"]
GRIDS = {
    "unit": (np.arange(1, 1024, dtype=float), 1),
    "step8": (np.arange(4, 4096, 8, dtype=float), 8),
    "irregular": (np.concatenate([np.arange(1, 256.0), np.arange(256, 1024.0, 8)]), 1),
}
PARAMS = ["amplitude", "length", "asymptote", "sigma", "exponent", "stretch", "period", "intercept", "slope"]
ALL_COLUMNS = [
    "target", "model", "status", "message",
    *(c for p in PARAMS for c in (p, f"{p}_se", f"{p}_ci_low", f"{p}_ci_high")),
    "r2", "rmse", "aic", "aicc", "bic", "qaicc", "akaike_weight", "decay_length", "decay_length_se",
    "decay_length_ci_low", "decay_length_ci_high", "ci_level", "n_points", "fit_min_distance", "fit_max_distance",
    "fit_range_rule", "misfit", "gof_p_value", "gof_test", "durbin_watson", "c_hat", "n_effective", "selected",
]


def synthetic(name, grid_key, seed=0, sd=1e-3):
    d, scale = GRIDS[grid_key]
    true = {k: v * scale if k in LENGTH_LIKE else v for k, v in EXAMPLES[name].items()}
    y = DECAY_MODELS[name].function(d, *true.values())
    return d, y + np.random.default_rng(seed).normal(0.0, sd, d.size), true


def c12_curve(seed=0):
    d = np.arange(0, 32753, 16, dtype=float)
    return d, 0.5 * np.exp(-d / 5000) + 0.3 + np.random.default_rng(seed).normal(0, 1e-3, d.size)


@pytest.fixture(autouse=True)
def no_warnings_leak():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def test_registry_order_and_parameter_names():
    assert list(DECAY_MODELS) == list(EXAMPLES)
    for name, model in DECAY_MODELS.items():
        assert model.name == name
        assert model.param_names == tuple(EXAMPLES[name])
        assert ("asymptote" in model.formula) != model.scale_free


@pytest.mark.parametrize("grid_key", list(GRIDS))
@pytest.mark.parametrize("name", list(EXAMPLES))
def test_recovers_known_parameters(name, grid_key):
    d, y, true = synthetic(name, grid_key)
    fits = fit_decay(d, y)
    fit = next(f for f in fits.fits if f.model == name)
    assert fit.status == "ok", fit.message
    assert fit.message == ""
    for p, value in true.items():
        assert fit.params[p] == pytest.approx(value, rel=0.03, abs=0.005), p
        assert 0 < fit.stderr[p] < 0.03 * max(abs(value), 0.1)
    assert fit.r2 > 0.99
    assert fit.rmse == pytest.approx(1e-3, rel=0.1)
    assert fit.n_points == d.size
    # with distinct shapes and small noise, AIC picks the true model
    assert fits.selected.model == name


@pytest.mark.parametrize("name", MONOTONE)
def test_decay_length_definition(name):
    """f(L) - asymptote == (f(0) - asymptote) / e for the closed-form decay length."""
    model = DECAY_MODELS[name]
    params = np.array(list(EXAMPLES[name].values()))
    length = model.decay_length(params)
    f0, fl = model.function(np.array([0.0, length]), *params)
    asymptote = EXAMPLES[name]["asymptote"]
    assert fl - asymptote == pytest.approx((f0 - asymptote) / math.e, rel=1e-12)


@pytest.mark.parametrize("start", [0.0, 1.0, 7.5, 40.0])
@pytest.mark.parametrize("name", [*MONOTONE, "damped_cosine"])
def test_decay_length_from_a_start_distance(name, start):
    """f(d0 + L) - asymptote == (f(d0) - asymptote) / e: the decay length measured from the first fitted distance."""
    model = DECAY_MODELS[name]
    params = np.array(list(EXAMPLES[name].values()))
    length = model.decay_length(params, start)
    if name == "damped_cosine" and start >= EXAMPLES[name]["period"] / 4:
        assert math.isnan(length)  # nothing left to fall from: g(start) <= 0
        return
    f0, fl = model.function(np.array([start, start + length]), *params)
    asymptote = EXAMPLES[name]["asymptote"]
    assert fl - asymptote == pytest.approx((f0 - asymptote) / math.e, rel=1e-9)
    if name == "exponential":
        assert length == EXAMPLES[name]["length"]  # memoryless: the same from any start


def test_the_log_law_has_no_decay_length():
    assert math.isnan(DECAY_MODELS["log_law"].decay_length(np.array([0.9, 0.1]), 1.0))
    assert DECAY_MODELS["log_law"].scale_free


@pytest.mark.parametrize("name", MONOTONE)
def test_fitted_decay_length_follows_definition(name):
    d, y, _ = synthetic(name, "unit")
    fit = fit_decay(d, y, models=[name]).fits[0]
    model = DECAY_MODELS[name]
    f0, fl = model.function(np.array([d[0], d[0] + fit.decay_length]), *fit.params.values())
    off = fit.params["asymptote"]
    assert fl - off == pytest.approx((f0 - off) / math.e, rel=1e-9)


def test_damped_cosine_decay_length_is_the_first_1_over_e_crossing():
    model = DECAY_MODELS["damped_cosine"]
    for length, period in [(150.0, 90.0), (30.0, 1000.0), (1e6, 400.0)]:
        params = np.array([0.7, length, period, 0.1])
        L = model.decay_length(params)
        assert 0 < L <= min(length, period / 4)
        f = lambda d: model.function(np.asarray(d, float), *params)  # noqa: E731
        assert f(L) - 0.1 == pytest.approx((f(0.0) - 0.1) / math.e, abs=1e-9)
        d = np.linspace(0, L, 1000)[:-1]
        assert (f(d) - 0.1 > (f(0.0) - 0.1) / math.e).all()  # the first crossing
    # an undamped oscillation decorrelates at its first 1/e point, not at its envelope's
    assert model.decay_length(np.array([1.0, 1e6, 400.0, 0.0])) == pytest.approx(
        400 / (2 * math.pi) * math.acos(1 / math.e), rel=1e-4)


def test_known_decay_lengths():
    gaussian = DECAY_MODELS["gaussian"].decay_length(np.array([1.0, 10.0, 0.0]))
    assert gaussian == pytest.approx(10 * math.sqrt(2))
    assert DECAY_MODELS["power_law"].decay_length(np.array([1.0, 1.0, 0.0])) == pytest.approx(math.e - 1)


def test_c12_long_range_exponential():
    d, y = c12_curve()
    fits = fit_decay(d, y)
    fit = fits.fits[0]
    assert fit.model == "exponential" and fit.status == "ok"
    assert fit.params["length"] == pytest.approx(5000, rel=0.05)
    assert 1 / fit.params["length"] == pytest.approx(2.0e-4, rel=0.05)
    assert fit.decay_length == pytest.approx(5000, rel=0.05)
    assert fit.params["amplitude"] == pytest.approx(0.5, rel=0.01)
    assert fit.params["asymptote"] == pytest.approx(0.3, rel=0.01)
    assert fits.selected.model in {"exponential", "stretched_exponential"}
    assert fits.selected.decay_length == pytest.approx(5000, rel=0.05)


def test_c12_without_distance_zero_and_weighted():
    d, y = c12_curve()
    d, y = d[1:], y[1:]
    fit = fit_decay(d, y, n_pairs=40000 - d, models="exponential").fits[0]
    assert fit.status == "ok"
    assert fit.decay_length == pytest.approx(5000, rel=0.05)


def test_c12_rising_profile_gives_status_not_exception():
    d = np.arange(0, 32753, 16, dtype=float)
    fits = fit_decay(d, 0.2 + 0.001 * d)
    assert [f.status for f in fits.fits] == ["rising"] * len(DECAY_MODELS)
    for f in fits.fits:
        assert math.isnan(f.decay_length)
        assert all(math.isnan(v) for v in f.params.values())
        assert "rises" in f.message
    assert fits.selected is None


def test_c11_flat_zero_profile():
    d = np.arange(1, 64, dtype=float)
    fits = fit_decay(d, np.zeros_like(d))
    assert [f.status for f in fits.fits] == ["flat"] * len(DECAY_MODELS)
    for f in fits.fits:
        assert math.isnan(f.decay_length)
        assert all(math.isnan(v) for v in [*f.params.values(), *f.stderr.values(), f.r2, f.aic])
        assert f.message and not f.selected
    assert fits.selected is None
    assert np.isnan(fits.predict(d)).all() and fits.predict(d).shape == d.shape
    frame = fits.to_frame()
    assert not frame["selected"].any() and frame["decay_length"].isna().all()


def test_random_like_noise_profile_is_flat():
    d = np.arange(1, 1024, dtype=float)
    n_pairs = 1024 - d
    rng = np.random.default_rng(3)
    y = rng.normal(0.0, 1 / np.sqrt(768 * n_pairs))
    std = np.full(d.size, 1 / np.sqrt(768))
    fits = fit_decay(d, y, n_pairs=n_pairs, std=std)
    assert {f.status for f in fits.fits} == {"flat"}
    assert "standard errors" in fits.fits[0].message
    assert fits.selected is None


def simulated_profile(pair_values):
    """mean, std (ddof 0) and n_pairs at each distance from per-pair similarity samples."""
    return (np.array([v.mean() for v in pair_values]), np.array([v.std() for v in pair_values]),
            np.array([v.size for v in pair_values], dtype=float))


@pytest.mark.parametrize("seed", range(5))
def test_noise_profile_with_single_pair_tail_is_flat(seed):
    """Up to distance n - 1 the last std comes from one pair (0) or two: still flat."""
    d = np.arange(1, 1024, dtype=float)
    rng = np.random.default_rng(seed)
    y, std, n_pairs = simulated_profile([rng.normal(0, 1 / np.sqrt(768), 1024 - k) for k in range(1, 1024)])
    assert std[-1] == 0.0 and n_pairs[-1] == 1
    assert {f.status for f in fit_decay(d, y, n_pairs=n_pairs, std=std).fits} == {"flat"}


def test_random_table_profile_is_flat():
    table = np.random.default_rng(0).normal(size=(512, 256))
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    sim = unit @ unit.T
    d = np.arange(1, 512)
    y, std, n_pairs = simulated_profile([np.diagonal(sim, k) for k in d])
    assert {f.status for f in fit_decay(d, y, n_pairs=n_pairs, std=std).fits} == {"flat"}


def test_std_does_not_make_a_real_decay_flat():
    d, y, _ = synthetic("exponential", "unit")
    fits = fit_decay(d, y, n_pairs=1024 - d, std=np.full(d.size, 0.03))
    assert fits.fits[0].status == "ok"


def test_to_frame_columns_and_selection():
    d, y, _ = synthetic("damped_cosine", "unit")
    fits = fit_decay(d, y)
    frame = fits.to_frame()
    assert list(frame.columns) == ALL_COLUMNS
    assert list(frame["model"]) == list(DECAY_MODELS)
    assert frame["selected"].sum() == 1
    ok = frame[frame["status"] == "ok"]
    chosen = frame[frame["selected"]].iloc[0]
    # deliberate change: selection by AICc (was AIC); Akaike weights sum to 1 over ok fits
    assert chosen["status"] == "ok" and chosen["aicc"] == ok["aicc"].min()
    assert ok["akaike_weight"].sum() == pytest.approx(1.0) and chosen["akaike_weight"] == ok["akaike_weight"].max()
    assert (frame["target"] == "profile").all()
    assert chosen["model"] == fits.selected.model
    assert np.isnan(frame.set_index("model").loc["exponential", "sigma"])
    assert frame.set_index("model").loc["gaussian", "sigma"] == fits.fits[1].params["sigma"]


def test_to_frame_subset_uses_first_seen_parameter_order():
    d, y, _ = synthetic("gaussian", "unit")
    frame = fit_decay(d, y, models=["gaussian", "exponential"]).to_frame()
    expected = [c for p in ("amplitude", "sigma", "asymptote", "length") for c in (p, f"{p}_se", f"{p}_ci_low",
                                                                                   f"{p}_ci_high")]
    assert list(frame.columns[4:20]) == expected


def test_predict_uses_selected_model():
    d, y, true = synthetic("gaussian", "unit")
    fits = fit_decay(d, y)
    expected = DECAY_MODELS["gaussian"].function(d, *fits.selected.params.values())
    np.testing.assert_allclose(fits.predict(d), expected)
    truth = DECAY_MODELS["gaussian"].function(d, *true.values())
    np.testing.assert_allclose(fits.predict(d), truth, atol=3e-3)


def test_sinusoidal_closed_form_profile_fits():
    dim = 128
    k = np.arange(1, 1024, dtype=float)
    w = 10000.0 ** (-2 * np.arange(dim // 2) / dim)
    y = (2 / dim) * np.cos(np.outer(k, w)).sum(axis=1)
    fits = fit_decay(k, y)
    assert isinstance(fits, DecayFits)
    assert fits.selected is not None and fits.selected.status == "ok"
    assert sum(f.selected for f in fits.fits) == 1
    # a log law with slope 1 / ln base (the cosine-integral limit): scale-free, so no decay length
    assert fits.selected.model == "log_law" and math.isnan(fits.selected.decay_length)
    assert fits.selected.params["slope"] == pytest.approx(1 / math.log(10000.0), rel=0.02)
    assert math.isnan(fits.averaged()[0]) and "scale-free" in fits.averaged()[2]


def test_nonfinite_and_unpaired_points_are_masked():
    d, y, true = synthetic("exponential", "unit")
    y[[3, 10]] = [np.nan, np.inf]
    n_pairs = 1024 - d
    n_pairs[20] = 0
    fit = fit_decay(d, y, n_pairs=n_pairs, models=["exponential"]).fits[0]
    # deliberate change: distances with fewer than 2 pairs are dropped too (n_pairs = 1 at d = 1023)
    assert fit.status == "ok" and fit.n_points == d.size - 4
    assert fit.params["length"] == pytest.approx(true["length"], rel=0.03)


def test_unsorted_input_gives_same_fit():
    d, y, _ = synthetic("exponential", "unit")
    order = np.random.default_rng(1).permutation(d.size)
    a = fit_decay(d, y, models=["exponential"]).fits[0]
    b = fit_decay(d[order], y[order], models=["exponential"]).fits[0]
    assert b.params["length"] == pytest.approx(a.params["length"], rel=1e-8)


def test_too_few_points_per_model():
    d = np.arange(1, 6, dtype=float)  # 5 points: enough for 3 parameters, not for 4
    fits = fit_decay(d, np.exp(-d / 2))
    status = {f.model: f.status for f in fits.fits}
    assert status["stretched_exponential"] == status["damped_cosine"] == "too_few_points"
    assert "needs at least 6" in next(f for f in fits.fits if f.model == "damped_cosine").message
    nan_only = fit_decay([1.0, np.nan], [1.0, 0.5])
    assert {f.status for f in nan_only.fits} == {"too_few_points"}
    assert nan_only.fits[0].n_points == 1


def test_unknown_model_lists_valid_names():
    with pytest.raises(ValueError, match="exponential.*damped_cosine") as info:
        fit_decay([1, 2, 3], [1, 0.5, 0.2], models=["exponential", "lorentzian"])
    assert "lorentzian" in str(info.value)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"distance": np.arange(5.0), "similarity": np.ones(4)},
        {"distance": np.arange(5.0), "similarity": np.ones(5), "n_pairs": np.ones(3)},
        {"distance": np.ones((2, 3)), "similarity": np.ones((2, 3))},
    ],
)
def test_shape_mismatch_names_shapes(kwargs):
    with pytest.raises(ValueError, match=r"got distance \("):
        fit_decay(**kwargs)


def test_negative_distance_refused():
    with pytest.raises(ValueError, match="distance must be >= 0"):
        fit_decay([-1.0, 0.0, 1.0, 2.0, 3.0, 4.0], np.ones(6))


def test_guess_is_never_reported_as_result():
    """A model that cannot move from its guess is not_converged, not ok (C11 kind)."""
    d = np.arange(1, 64, dtype=float)
    y = np.where(d < 2, 1e-3, 0.0)  # one tiny step: not flat, nothing to fit
    for f in fit_decay(d, y).fits:
        if f.status == "ok":
            assert np.isfinite(f.decay_length) != f.decay_model.scale_free
        else:
            assert math.isnan(f.decay_length) and f.message


def _custom_model(name, function, extra=()):
    """The exponential model under another name and function, with extra parameters (start 1, bounds [0.5, 2])."""
    from poslab.analysis.decay import Parameter

    base = DECAY_MODELS["exponential"]
    more = tuple(Parameter(p, "", "", lambda s: (0.5, 2.0), lambda s: 1.0) for p in extra)
    return replace(base, name=name, function=function, parameters=base.parameters + more)


def test_redundant_parameter_is_not_identifiable():
    def redundant(d, amplitude, length, asymptote, scale):  # amplitude * scale is all the data can see
        return amplitude * scale * np.exp(-d / length) + asymptote

    model = _custom_model("redundant", redundant, extra=("scale",))
    d, y, _ = synthetic("exponential", "unit")
    fits = fit_decay(d, y, models=[model, "exponential"])
    assert fits.fits[0].status == "not_identifiable" and "parameters" in fits.fits[0].message
    assert math.isnan(fits.fits[0].decay_length) and not fits.fits[0].selected
    assert fits.selected.model == "exponential"


def test_broken_model_function_is_failed():
    d, y, _ = synthetic("exponential", "unit")
    fit = fit_decay(d, y, models=[_custom_model("broken", lambda d, a, length, off: np.ones(3))]).fits[0]
    assert fit.status == "failed" and fit.message


def test_the_catalogue_is_read_only_and_models_carry_their_hints():
    with pytest.raises(TypeError):
        DECAY_MODELS["mine"] = DECAY_MODELS["exponential"]  # pass DecayModel objects to fit_decay instead
    model = DECAY_MODELS["gaussian"]
    assert model.param_names == ("amplitude", "sigma", "asymptote") and model.length_rule.startswith("sqrt(d0**2 + 2 * sigma**2) - d0")
    assert [p.unit for p in model.parameters] == ["cosine similarity", "positions", "cosine similarity"]


def test_maxfev_gives_not_converged():
    d, y = c12_curve()
    fits = fit_decay(d, y, maxfev=2)
    assert {f.status for f in fits.fits if f.model != "log_law"} == {"not_converged"}
    assert "distances > 0" in fits.fits[-1].message  # c12's curve starts at distance 0: no ln d
    assert "did not converge" in fits.fits[0].message
    assert fits.selected is None and np.isnan(fits.predict([1.0, 2.0])).all()


def test_negative_pair_counts_are_refused():
    d = np.arange(1.0, 40.0)
    with pytest.raises(ValueError, match=r"n_pairs must be >= 0 .* got minimum -3"):
        fit_decay(d, np.exp(-d / 5), n_pairs=np.full(d.size, -3.0))


def test_min_aic_gain_is_a_setting():
    d, y, se = synthetic("exponential", "unit")
    assert fit_decay(d, y, models=["exponential"]).selected is not None
    strict = fit_decay(d, y, models=["exponential"], min_aic_gain=1e9).fits[0]
    assert strict.status == "no_better_than_constant" and "1e+09" in strict.message


def test_noise_without_std_never_reports_absurd_decay_length():
    d = np.arange(1, 1024, dtype=float)
    fits = fit_decay(d, np.random.default_rng(0).normal(0, 0.01, d.size))
    for f in fits.fits:
        assert f.status != "ok" or f.decay_length <= 150 * (d[-1] - d[0])


def test_parameter_on_its_bound_is_not_passed_off_as_a_result():
    """A power law through a profile that levels off far above its asymptote
    pins the exponent at its lower bound; the decay length would be the cap."""
    d = np.arange(1, 1024, dtype=float)
    omega = 500000.0 ** (-np.arange(0, 128, 2) / 128)
    y = (2 / 128) * np.cos(np.outer(d, omega)).sum(axis=1)  # the RoPE profile of the default study
    fits = fit_decay(d, y, n_pairs=1024 - d, models=["power_law", "exponential"])
    power = fits.fits[0]
    assert power.status == "at_bound" and "exponent" in power.message and np.isnan(power.decay_length)
    assert fits.selected is not None and fits.selected.model == "exponential"


def test_noise_is_not_a_decay_even_without_std():
    """Pure noise fitted without std/n_pairs: no model beats a constant by ΔAIC >= 10."""
    rng = np.random.default_rng(0)
    d = np.arange(1, 512, dtype=float)
    for trial in range(20):
        fits = fit_decay(d, rng.normal(0, 0.01, d.size))
        assert fits.selected is None, fits.to_frame()[["model", "status", "decay_length"]]
        assert {f.status for f in fits.fits} <= {"no_better_than_constant", "at_bound", "not_identifiable",
                                                  "out_of_range", "not_converged"}


def test_small_random_tables_get_no_decay_length():
    """A report: random dim 4, n 256, seed 5 was given a Gaussian decay length 3.86 with r2 < 0."""
    from poslab.analysis import similarity_profile
    from poslab.encodings import make_encoding

    for seed in range(10):
        table = make_encoding("random").generate(256, 4, rng=np.random.default_rng(seed))
        p = similarity_profile(table)
        fits = fit_decay(p.distance[1:], p.mean_similarity[1:], n_pairs=p.n_pairs[1:], std=p.std_similarity[1:])
        assert fits.selected is None or fits.selected.r2 > 0.5, (seed, fits.to_frame())


def test_decay_length_beyond_the_data_is_out_of_range():
    d = np.arange(1, 448, dtype=float)
    y = 0.6 * np.exp(-d / 2000.0) + 0.2  # barely decays within the window
    fit = fit_decay(d, y, models=["exponential"]).fits[0]
    assert fit.status == "out_of_range" and "extrapolation" in fit.message and np.isnan(fit.decay_length)


# ---------------------------------------------------------------- issue 5: fitting done right


def test_weights_are_the_standard_error_of_the_mean_with_a_floor():
    n = np.array([100.0, 100.0, 25.0, 4.0])
    std = np.array([0.2, 1e-9, 0.2, 0.4])
    pooled = math.sqrt(np.sum(n * std**2) / n.sum())
    se = decay.fit_weights(n, std)
    np.testing.assert_allclose(se, [0.02, 0.1 * pooled / 10, 0.04, 0.2])  # the tiny std is floored
    np.testing.assert_allclose(decay.fit_weights(n, None), 1 / np.sqrt(n))
    assert decay.fit_weights(None, std) is None
    # an exactly translation-invariant profile (std 0 everywhere): the absolute floor, weights ~ n_pairs
    np.testing.assert_allclose(decay.fit_weights(n, np.zeros(4)), 1e-6 / np.sqrt(n))


def test_aicc_and_akaike_weights():
    d, y, _ = synthetic("exponential", "unit")
    fits = fit_decay(d, y, n_pairs=1024 - d, std=np.full(d.size, 0.03))
    ok = [f for f in fits.fits if f.status == "ok"]
    for f in ok:
        k = len(f.params)
        assert f.aicc == pytest.approx(f.aic + 2 * k * (k + 1) / (f.n_points - k - 1), rel=1e-12)
    general = max(ok, key=lambda f: (len(f.params), -f.chi2))  # the most general ok model gives c_hat
    tau = decay.autocorrelation_time(general.residuals)
    assert fits.c_hat == pytest.approx(tau * general.chi2 / (general.n_points - len(general.params)), rel=1e-12)
    assert fits.n_effective == pytest.approx(general.n_points / tau, rel=1e-12)
    for f in ok:
        k = len(f.params) + 1
        assert f.qaicc == pytest.approx(f.chi2 / fits.c_hat + 2 * k + 2 * k * (k + 1) / (fits.n_effective - k - 1))
    best = min(f.qaicc for f in ok)
    raw = np.array([math.exp(-(f.qaicc - best) / 2) for f in ok])
    np.testing.assert_allclose([f.akaike_weight for f in ok], raw / raw.sum(), rtol=1e-12)
    assert fits.selected.qaicc == best
    assert all(math.isnan(f.akaike_weight) for f in fits.fits if f.status != "ok")


def test_wald_intervals_cover_the_truth_with_independent_noise():
    """With i.i.d. noise the 95 % Wald intervals of the parameters and of the decay length
    cover the true values in about 95 % of 100 repetitions."""
    d = np.arange(1, 200, dtype=float)
    truth = {"amplitude": 0.6, "length": 30.0, "asymptote": 0.2}
    covered = {p: 0 for p in [*truth, "decay_length"]}
    for seed in range(100):
        y = DECAY_MODELS["exponential"].function(d, *truth.values()) + np.random.default_rng(seed).normal(0, 0.01, d.size)
        f = fit_decay(d, y, models="exponential").fits[0]
        assert f.status == "ok" and f.ci_level == 0.95
        for p, v in truth.items():
            covered[p] += f.ci[p][0] <= v <= f.ci[p][1]
        covered["decay_length"] += f.decay_length_ci[0] <= 30.0 <= f.decay_length_ci[1]
        assert f.decay_length_se == pytest.approx(f.stderr["length"], rel=1e-5)  # decay length = length
    assert all(88 <= c <= 99 for c in covered.values()), covered


def test_level_changes_the_interval_width():
    d, y, _ = synthetic("exponential", "unit")
    wide = fit_decay(d, y, models="exponential", level=0.99).fits[0]
    narrow = fit_decay(d, y, models="exponential", level=0.5).fits[0]
    t99, t50 = stats.t.ppf(0.995, d.size - 3), stats.t.ppf(0.75, d.size - 3)
    assert (wide.ci["length"][1] - wide.params["length"]) / (narrow.ci["length"][1] - narrow.params["length"]) \
        == pytest.approx(t99 / t50, rel=1e-9)
    for bad in (0.0, 1.0, "0.9"):
        with pytest.raises(ValueError, match="level"):
            fit_decay(d, y, level=bad)


def test_relative_standard_error_above_one_is_not_identifiable():
    """A decay of amplitude 0.002 hidden in noise of 0.01: whatever the optimiser finds, the amplitude
    or length is not determined (relative se > 1), and no number is reported."""
    d = np.arange(1, 400, dtype=float)
    rng = np.random.default_rng(4)
    statuses = set()
    for trial in range(10):
        y = 0.002 * np.exp(-d / 20) + rng.normal(0, 0.01, d.size)
        f = fit_decay(d, y, models="exponential").fits[0]
        statuses.add(f.status)
        if f.status == "not_identifiable" and "relative standard error" in f.message:
            assert math.isnan(f.decay_length) and math.isnan(f.ci["length"][0])
    assert "ok" not in statuses and "not_identifiable" in statuses


@pytest.mark.parametrize("y, status", [
    (np.full(40, 0.3), "flat"),                                   # a constant (C11 kind, not zero)
    (np.r_[0.2 + 0.001 * np.arange(40)], "rising"),                # C12's rising profile, short
    (np.r_[0.2 + 1e-12 * np.sin(np.arange(40))], "flat"),        # float jitter is no decay
])
def test_degenerate_profiles_get_statuses(y, status):
    d = np.arange(1, 41, dtype=float)
    fits = fit_decay(d, y)
    assert {f.status for f in fits.fits} == {status}
    assert fits.selected is None and all(math.isnan(f.decay_length) for f in fits.fits)


def test_two_pairs_or_fewer_and_all_nan():
    d = np.arange(1, 30, dtype=float)
    y = np.exp(-d / 5)
    fits = fit_decay(d, y, n_pairs=np.ones(d.size), std=np.zeros(d.size))  # one pair everywhere: dropped
    assert {f.status for f in fits.fits} == {"too_few_points"} and fits.fits[0].n_points == 0
    fits = fit_decay(d, np.full(d.size, np.nan))
    assert {f.status for f in fits.fits} == {"too_few_points"}


def test_a_decay_with_a_long_noisy_tail_is_not_rising():
    """A fast decay followed by 1000 distances of noise has Spearman rho > 0 over the tail but is no rise."""
    from poslab.analysis import similarity_profile
    from poslab.encodings import make_encoding

    table = make_encoding("smoothed_random", length_scale=4.0).generate(1024, 256, rng=np.random.default_rng(0))
    p = similarity_profile(table)
    fits = fit_decay(p.distance[1:], p.mean_similarity[1:], n_pairs=p.n_pairs[1:], std=p.std_similarity[1:])
    # decay length measured from distance 1: sqrt(4 sigma^2 + 1) - 1 for the profile exp(-k^2 / (4 sigma^2))
    assert fits.selected is not None and fits.selected.decay_length == pytest.approx(math.sqrt(65) - 1, rel=0.05)


def test_envelope_of_an_oscillating_profile():
    """A damped oscillation around a slow exponential: the envelope is the running maximum from the
    right, fitted where the profile touches it, and reported as target = envelope."""
    d = np.arange(1, 600, dtype=float)
    y = 0.5 * np.exp(-d / 150) + 0.1 * np.cos(2 * np.pi * d / 40) * np.exp(-d / 300) + 0.2
    envelope, touches = decay.upper_envelope(y)
    assert np.all(envelope >= y) and np.all(np.diff(envelope) <= 0) and np.array_equal(envelope[touches], y[touches])
    assert decay.oscillates(y) and not decay.oscillates(np.exp(-d / 50))
    fits = fit_decay(d, y, target="envelope")
    assert fits.target == "envelope" and {f.target for f in fits.fits} == {"envelope"}
    assert fits.distance.size == touches.sum() and fits.selected is not None
    frame = fits.to_frame()
    assert (frame["target"] == "envelope").all()
    # the envelope of a monotone profile is the profile: same fit
    mono = np.exp(-d / 50) + 0.1
    a = fit_decay(d, mono, models="exponential").fits[0]
    b = fit_decay(d, mono, models="exponential", target="envelope").fits[0]
    assert a.decay_length == pytest.approx(b.decay_length, rel=1e-12)
    with pytest.raises(ValueError, match="target"):
        fit_decay(d, y, target="peaks")


def test_envelope_of_a_flat_profile_is_flat():
    d = np.arange(1, 64, dtype=float)
    assert {f.status for f in fit_decay(d, np.zeros_like(d), target="envelope").fits} == {"flat"}


def test_a_noisy_tail_is_not_an_oscillation(gpt2_table):
    from poslab.analysis import similarity_profile
    from poslab.encodings import make_encoding

    fooled = 0
    for seed in range(3):
        table = make_encoding("smoothed_random", length_scale=3.0).generate(256, 64, rng=np.random.default_rng(seed))
        p = similarity_profile(table)
        se = decay.fit_weights(p.n_pairs[1:], p.std_similarity[1:])
        assert not decay.oscillates(p.mean_similarity[1:], se=se)
        fooled += decay.oscillates(p.mean_similarity[1:])  # without standard errors the noise passes
    assert fooled == 3
    p = similarity_profile(gpt2_table)  # the helix: a real oscillation
    assert decay.oscillates(p.mean_similarity[1:], se=decay.fit_weights(p.n_pairs[1:], p.std_similarity[1:]))


def test_bin_points_are_pair_weighted_means_with_pooled_std():
    bins = np.array([[0, 1], [1, 3], [3, 6]])
    d = np.arange(6.0)
    y = np.array([0.9, 0.8, 0.6, 0.5, 0.4, 0.1])
    n = np.array([10.0, 9.0, 1.0, 7.0, 6.0, 5.0])
    s = np.array([0.1, 0.2, 0.4, 0.1, 0.2, 0.3])
    db, yb, nb, sb = decay.bin_points(bins, d, y, n, s)
    np.testing.assert_allclose(nb, [10, 10, 18])
    np.testing.assert_allclose(db, [0, (9 * 1 + 1 * 2) / 10, (7 * 3 + 6 * 4 + 5 * 5) / 18])
    np.testing.assert_allclose(yb, [0.9, (9 * 0.8 + 0.6) / 10, (7 * 0.5 + 6 * 0.4 + 5 * 0.1) / 18])
    np.testing.assert_allclose(sb, [0.1, math.sqrt((9 * 0.04 + 0.16) / 10), math.sqrt((7 * .01 + 6 * .04 + 5 * .09) / 18)])
    # the standard error of a bin is that of the weighted mean of independent per-distance means
    se = decay.fit_weights(n, s, pooled=0.0)  # floor 1e-6: no effect here
    se_bins = decay.fit_weights(nb, sb, pooled=0.0)
    assert se_bins[2] == pytest.approx(math.sqrt(np.sum((n[3:] * se[3:]) ** 2)) / 18)


def test_long_profile_is_fitted_on_bins_and_recovers_the_truth():
    """131071 distances of an exponential (length 5000, beyond the 2048 unbinned distances) with
    independent noise: fitted on 4096 points (2048 distances, 2048 bins of 62 or 63) and the true length
    lies within the fit's interval; an oscillation of period 1000 (much slower than a bin) is kept."""
    rng = np.random.default_rng(3)
    d = np.arange(1, 131072, dtype=float)
    n = 131072 - d
    std = np.full(d.size, 0.2)
    y = 0.8 * np.exp(-d / 5000) + 0.1 + rng.standard_normal(d.size) * std / np.sqrt(n)
    fits = fit_decay(d, y, n_pairs=n, std=std, models=["exponential"])
    best = fits.selected
    assert best.n_points == fits.distance.size == decay.MAX_FIT_POINTS
    np.testing.assert_array_equal(fits.distance[:2048], d[:2048])
    assert fits.bin_distance.size == d.size - 1  # the last distance has one pair: dropped
    assert fits.bins[0, 0] == 0 and fits.bins[-1, 1] == d.size - 1 and np.all(fits.bins[1:, 0] == fits.bins[:-1, 1])
    assert set(np.diff(fits.bins[2048:], axis=1).ravel()) == {62, 63}
    assert best.ci["length"][0] < 5000 < best.ci["length"][1]
    assert best.decay_length == pytest.approx(5000, rel=0.01)
    wave = 0.5 * np.exp(-d / 20000) * np.cos(2 * np.pi * d / 1000) + 0.2
    cosine = fit_decay(d, wave, n_pairs=n, std=std, models=["damped_cosine"]).selected
    assert cosine.params["period"] == pytest.approx(1000, rel=1e-3)
    assert cosine.params["length"] == pytest.approx(20000, rel=0.02)  # bins of 63 of a 1000-period wave


def test_short_profiles_are_not_binned():
    d = np.arange(1, decay.MAX_FIT_POINTS + 1, dtype=float)
    fits = fit_decay(d, np.exp(-d / 100), n_pairs=np.full(d.size, 50.0), models=["exponential"])
    assert fits.bins is None and fits.bin_distance is None and fits.selected.n_points == d.size


def test_short_decay_over_a_million_distances_is_not_at_bound():
    """Length bounds span 0.1 to 1e8 positions here: a length of 37 is far from both on a log scale
    (a linear 1e-6 of the width, 100 positions, used to pin it)."""
    d = np.arange(1, 1 << 20, dtype=float)
    y = 0.9 * np.exp(-d / 37) + 0.05
    best = fit_decay(d, y, n_pairs=(1 << 20) - d, models=["exponential"]).selected
    assert best is not None and best.decay_length == pytest.approx(37, rel=0.01)
    assert not decay._on_bound(37.0, 0.1, 1e8) and decay._on_bound(0.1 * (1 + 1e-6), 0.1, 1e8)
    assert decay._on_bound(2.0, 0.0, 2.0) and not decay._on_bound(1.9, 0.0, 2.0)


# ---------------------------------------------------------------- issue 13: fits that must fit
def _cosine_sum(base, n_freq, k):
    """(1/m) Σ cos(k θ_i), θ_i = base^(-i/m): the exact profile of sinusoidal / RoPE with m frequencies."""
    theta = base ** (-np.arange(n_freq) / n_freq)
    return np.cos(np.outer(k, theta)).mean(axis=1)


@pytest.mark.parametrize("base, n_freq", [(10000.0, 384), (500000.0, 64), (10000.0, 32)])
def test_log_law_slope_is_one_over_ln_base_on_exact_cosine_sums(base, n_freq):
    """S(k) ≈ [Ci(k) − Ci(k / base)] / ln base ≈ 1 − (γ + ln k) / ln base: the log law's slope is 1 / ln base."""
    k = np.arange(1, 1024, dtype=float)
    fits = fit_decay(k, _cosine_sum(base, n_freq, k), n_pairs=1024 - k, std=np.zeros(k.size), noise=np.zeros(k.size))
    assert fits.gate == "exact" and fits.selected.model == "log_law"
    assert fits.selected.params["slope"] == pytest.approx(1 / math.log(base), rel=0.02)
    single = [f for f in fits.fits if f.model in ("exponential", "gaussian")]
    assert all(f.status == "poor_fit" and "exact profile" in f.message for f in single)  # the window's scale: refused


def test_fit_range_ends_at_the_first_zero_crossing_or_the_window():
    d = np.arange(1, 200, dtype=float)
    assert decay.fit_range_end(d, np.cos(d / 40)) == (63.0, "first_zero_crossing")  # cos < 0 from 62.8
    assert decay.fit_range_end(d, np.exp(-d / 40)) == (None, "window")
    y = np.exp(-d / 20) + 0.05 * np.cos(d / 5)
    fits = fit_decay(d, y, max_distance=decay.fit_range_end(d, y)[0], range_rule="first_zero_crossing",
                     models=["exponential"])
    assert fits.fit_range[1] <= decay.fit_range_end(d, y)[0] and fits.range_rule == "first_zero_crossing"
    assert set(fits.to_frame()["fit_range_rule"]) == {"first_zero_crossing"}


def test_a_decay_length_beyond_the_fitted_range_is_out_of_range_not_extrapolated():
    d = np.arange(1, 30, dtype=float)
    y = 0.8 * np.exp(-d / 100) + 0.1 + np.random.default_rng(0).normal(0, 1e-4, d.size)
    fit = fit_decay(d, y, models=["exponential"]).fits[0]
    assert fit.status == "out_of_range" and "extrapolation" in fit.message and math.isnan(fit.decay_length)


def _correlated_noise(d, n_blocks, scale, rng):
    """A noise factor F (n_points, n_blocks) smooth in d (as anchor blocks give), and one draw F z."""
    phases = rng.uniform(0, 2 * np.pi, n_blocks)
    widths = rng.uniform(10, 60, n_blocks)
    factor = scale * np.cos(d[:, None] / widths + phases) * np.exp(-d[:, None] / 300) / math.sqrt(n_blocks)
    return factor, factor @ rng.standard_normal(n_blocks)


def test_gate_false_alarms_on_the_true_model_are_rare_and_a_systematic_misfit_is_poor_fit():
    d = np.arange(1, 300, dtype=float)
    truth = DECAY_MODELS["exponential"].function(d, 0.8, 30.0, 0.05)
    alarms = 0
    for seed in range(40):
        factor, noise = _correlated_noise(d, 24, 0.02, np.random.default_rng(seed))
        fits = fit_decay(d, truth + noise, models=["exponential"], noise=factor)
        assert fits.gate == "noise"
        alarms += fits.fits[0].status == "poor_fit"
    assert alarms <= 2, alarms
    factor, noise = _correlated_noise(d, 24, 0.002, np.random.default_rng(1))
    wrong = fit_decay(d, truth + noise, models=["gaussian"], noise=factor).fits[0]
    assert wrong.status == "poor_fit" and "p = " in wrong.message and "tolerance 0.1" in wrong.message


def test_qaicc_uses_the_design_effect_and_the_blocks_with_a_noise_factor():
    d = np.arange(1, 300, dtype=float)
    factor, noise = _correlated_noise(d, 16, 0.01, np.random.default_rng(3))
    fits = fit_decay(d, DECAY_MODELS["exponential"].function(d, 0.8, 30.0, 0.05) + noise, noise=factor,
                     models=["exponential", "stretched_exponential", "gaussian"])
    ok = [f for f in fits.fits if f.status == "ok"]
    general = max(ok, key=lambda f: (len(f.params), -f.chi2))
    assert fits.c_hat == pytest.approx(general.design_effect) and fits.n_effective == 16
    for f in ok:
        k = len(f.params) + 1
        assert f.qaicc == pytest.approx(f.chi2 / fits.c_hat + 2 * k + 2 * k * (k + 1) / (16 - k - 1))
    assert fits.selected.model == "exponential"


def test_sandwich_covariance_with_independent_noise_is_the_model_covariance():
    """With F = diag(sigma) (independent noise of the fit's own standard errors) the sandwich is (JᵀWJ)⁻¹."""
    d = np.arange(1.0, 60.0)
    popt = np.array([0.8, 12.0, 0.1])
    sigma = np.full(d.size, 0.01)
    jac = decay._jacobian(DECAY_MODELS["exponential"], d, popt)
    cov, deff = decay._sandwich(jac, 1 / sigma**2, np.diag(sigma))
    np.testing.assert_allclose(cov, np.linalg.inv(jac.T @ (jac / sigma[:, None] ** 2)), rtol=1e-6)
    assert deff == pytest.approx(1.0, rel=1e-6)


def test_model_averaged_decay_length_and_its_unconditional_standard_error():
    d, y, _ = synthetic("exponential", "unit")
    fits = fit_decay(d, y, models=["exponential", "stretched_exponential", "log_law"])
    scaled = [f for f in fits.fits if f.status == "ok" and np.isfinite(f.decay_length)]
    w = np.array([f.akaike_weight for f in scaled])
    w = w / w.sum()
    lengths = np.array([f.decay_length for f in scaled])
    mean = w @ lengths
    se = w @ np.sqrt(np.array([f.decay_length_se for f in scaled]) ** 2 + (lengths - mean) ** 2)
    assert fits.averaged()[:2] == pytest.approx((mean, se))  # Burnham & Anderson 2002, eq. 4.9


def test_autocorrelation_time_of_white_noise_and_of_an_ar1_series():
    from scipy import signal

    rng = np.random.default_rng(0)
    assert decay.autocorrelation_time(rng.standard_normal(20000)) == pytest.approx(1.0, abs=0.1)
    x = signal.lfilter([1.0], [1.0, -0.8], rng.standard_normal(200000))
    assert decay.autocorrelation_time(x) == pytest.approx((1 + 0.8) / (1 - 0.8), rel=0.1)  # τ = (1 + φ) / (1 − φ)


def test_wald_intervals_use_the_level():
    d, y, _ = synthetic("exponential", "unit")
    wide, narrow = (fit_decay(d, y, models=["exponential"], level=level).fits[0] for level in (0.99, 0.5))
    assert wide.ci_level == 0.99 and narrow.ci_level == 0.5
    assert np.diff(wide.decay_length_ci)[0] > 3 * np.diff(narrow.decay_length_ci)[0]
