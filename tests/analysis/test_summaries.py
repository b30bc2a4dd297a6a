"""Model-free summaries: closed forms, brute-force loops, degenerate profiles, refused thresholds, the vectorised form."""

import math

import numpy as np
import pytest

from poslab.analysis.summaries import (STATUSES, profile_summaries, summaries_many, summary_names)

K = np.arange(0, 1024)


def _brute_first_below(y, level):
    for k, v in enumerate(y):
        if np.isfinite(v) and v < level:
            return k
    return None


def test_exponential_closed_forms():
    L = 40.0
    s = profile_summaries(K, np.exp(-K / L), thresholds=[0.9, 0.5])
    assert s["band_width_0p9"] == math.ceil(L * math.log(1 / 0.9))
    assert s["band_width_0p5"] == math.ceil(L * math.log(2))
    assert s["e_folding_distance"] == L + 1  # exp(-k/L) < 1/e from k = L + 1 (equal at L)
    assert s.crossing[s.names.index("band_width_0p5")] == pytest.approx(L * math.log(2), rel=2e-3)
    for name in ("zero_crossing", "integral_scale", "first_minimum"):
        assert s.status_of(name) == "not_reached" and math.isnan(s[name])
    assert "max_distance 1023" in s.reason[s.names.index("integral_scale")]


def test_integral_scale_of_a_cosine_quarter_and_a_linear_profile():
    # S = 1 - k/100 crosses 0 at 100 (S(100) = 0 is not below 0; S(101) < 0): integral = 50, trapezoid exact
    s = profile_summaries(K[:300], 1 - K[:300] / 100.0, thresholds=[0.5])
    assert s["zero_crossing"] == 101 and s["integral_scale"] == pytest.approx(50.0, abs=1e-9)
    # damped so that it decays; integral of exp(-k/L) cos(wk) to its first zero pi/(2w): trapezoid within 1e-3
    L, w = 300.0, math.pi / 200
    y = np.exp(-K / L) * np.cos(w * K)
    s = profile_summaries(K, y, thresholds=[0.5])
    a = -1 / L
    exact = (math.exp(a * 100) * (a * math.cos(w * 100) + w * math.sin(w * 100)) - a) / (a * a + w * w)
    assert s["integral_scale"] == pytest.approx(exact, rel=1e-3)
    assert s["zero_crossing"] == _brute_first_below(y, 0.0)
    assert s["first_minimum"] == pytest.approx(np.argmin(y[:400]))


@pytest.mark.parametrize("seed", range(5))
def test_crossings_match_a_brute_force_loop_on_noisy_decays(seed):
    rng = np.random.default_rng(seed)
    y = np.exp(-K / rng.uniform(5, 200)) - 0.3 + 0.05 * rng.normal(size=K.size)
    y[0] = 1.0
    y[rng.choice(np.arange(1, K.size), 20, replace=False)] = np.nan  # distances without a pair are skipped
    thresholds = [0.9, 0.5, 0.1, -0.2]
    s = profile_summaries(K, y, thresholds=thresholds)
    if s.degenerate:
        pytest.skip("drew a degenerate profile")
    for t in thresholds:
        want = _brute_first_below(y, t)
        got = s[f"band_width_{t:g}".replace('-', 'm').replace('.', 'p')]
        assert (math.isnan(got) and want is None) or got == want
    assert s["e_folding_distance"] == _brute_first_below(y, 1 / math.e)
    assert s["zero_crossing"] == _brute_first_below(y, 0.0)


def test_vectorised_rows_equal_one_profile_each():
    rng = np.random.default_rng(3)
    rows = np.stack([np.exp(-K / L) * np.cos(K / w) for L, w in rng.uniform([20, 30], [400, 300], size=(6, 2))])
    many = summaries_many(K, rows, thresholds=[0.9, 0.5])
    for r, y in enumerate(rows):
        one = profile_summaries(K, y, thresholds=[0.9, 0.5])
        np.testing.assert_array_equal(many.values[r], one.values)
        assert tuple(STATUSES[c] for c in many.status[r]) == one.status
    assert many.names == summary_names([0.9, 0.5])


@pytest.mark.parametrize("profile, status", [
    (np.r_[1.0, np.full(200, 0.3)], "flat"),                          # constant beyond distance 0
    (np.r_[1.0, np.full(200, np.nan)], "too_few_points"),             # NaN beyond distance 0
    (np.array([1.0, 0.2]), "too_few_points"),                          # two points
    (np.r_[1.0, np.linspace(0.1, 0.9, 200)], "rising"),                # rising
    (np.cos(np.arange(300) * 2 * np.pi / 40), "no_decay"),             # oscillating without decay
])
def test_degenerate_profiles_get_a_status_with_a_reason_never_a_number(profile, status):
    s = profile_summaries(np.arange(profile.size), profile, thresholds=[0.9, 0.5, 0.0])
    assert set(s.status) == {status}
    assert np.isnan(s.values).all()
    assert all(s.reason) and math.isnan(s.first_minimum_similarity)
    assert s.notes().startswith(f"every summary: {status} (")


@pytest.mark.parametrize("bad", [[1.5], [0.5, -1.2], [float("nan")], [float("inf")]])
def test_thresholds_outside_minus_one_one_are_refused_naming_the_range(bad):
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        profile_summaries(K, np.exp(-K / 10.0), thresholds=bad)
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        summaries_many(K, np.exp(-K / 10.0)[None], thresholds=bad)


def test_ill_conditioned_crossing_of_a_rippling_profile_is_flagged():
    # a log decay with a ripple around 0.5 after its first crossing: re-crosses, and ±0.02 moves it far
    y = 1 - 0.08 * np.log1p(K) + 0.03 * np.sin(K / 5.0) * (K > 300)
    s = profile_summaries(K, y, thresholds=[0.5, 0.9])
    j = s.names.index("band_width_0p5")
    assert s.recrossings[j] > 0 and s.ill_conditioned[j]
    assert "ill_conditioned" in s.notes()
    assert not s.ill_conditioned[s.names.index("band_width_0p9")]
    assert s.slope[j] < 0


def test_noise_is_no_first_minimum_with_standard_errors():
    rng = np.random.default_rng(0)
    y = np.exp(-K / 100.0) + 0.01 * rng.normal(size=K.size)
    y[0] = 1
    assert profile_summaries(K, y, se=np.full(K.size, 0.01)).status_of("first_minimum") == "not_reached"
    assert profile_summaries(K, y, se=None, min_rise=0.02).status_of("first_minimum") == "ok"


def test_first_minimum_depth():
    y = np.exp(-K / 200.0) * np.cos(K * 2 * np.pi / 100)
    s = profile_summaries(K, y, thresholds=[0.5])
    k = int(s["first_minimum"])
    assert k == np.argmin(y[:100])
    assert s.first_minimum_depth == pytest.approx(y[k:].max() - y[k], abs=1e-12)  # never falls below it again


def test_an_integral_scale_ending_at_an_ill_conditioned_zero_crossing_says_so():
    # a slow decay through 0 with a ripple after it: the zero crossing re-crosses; the integral up to it inherits
    # the flag, and its reason says the range is that of the crossing it ends at, not of the integral itself
    y = 0.5 - 0.08 * np.log1p(K) + 0.03 * np.sin(K / 5.0) * (K > 530)  # crosses 0 at ~517 slowly, ripples after
    s = profile_summaries(K, y, thresholds=[0.5])
    z, i = s.names.index("zero_crossing"), s.names.index("integral_scale")
    assert s.ill_conditioned[z] and s.ill_conditioned[i]
    assert s.reason[i].startswith("it ends at the zero crossing, which is ill-conditioned: ")
    assert s.reason[i].endswith(s.reason[z]) and not s.reason[z].startswith("it ends")
    assert s["integral_scale"] == pytest.approx(517 - 0.16 * (518 * math.log(518) - 517), rel=1e-2)  # ~82, not ~517


def _brute_crossing(k, y, level):
    """The first distance below ``level``, interpolated linearly from the point before it (a plain loop)."""
    for i in range(len(y)):
        if y[i] < level:
            if i == 0:
                return float(k[0])
            return float(k[i - 1] + (y[i - 1] - level) / (y[i - 1] - y[i]) * (k[i] - k[i - 1]))
    return math.nan


@pytest.mark.parametrize("tau", [150.0, 282.4])
def test_a_crossing_not_reached_keeps_where_s_falls_below_the_level_plus_delta(tau):
    """S = 0.5 + 0.5 exp(-k / tau) never falls below 0.5: the 0.5 band width is not reached, but S falls below
    0.52 inside the window (at tau ln 25: 909 for tau = 282.4), and crossing_low records it (the brute-force scan,
    interpolated as for a reached crossing); crossing_high stays empty (S never falls below 0.48)."""
    y = 0.5 + 0.5 * np.exp(-K / tau)
    s = profile_summaries(K, y, thresholds=[0.9, 0.5])
    j = s.names.index("band_width_0p5")
    assert s.status_of("band_width_0p5") == "not_reached" and math.isnan(s.values[j])
    want = _brute_crossing(K, y, 0.52)
    assert want == pytest.approx(tau * math.log(25), abs=1.0)
    assert s.crossing_low[j] == pytest.approx(want, abs=1e-9)
    assert math.isnan(s.crossing_high[j]) and not s.ill_conditioned[j]
    assert f"at {want:.1f} (crossing_low" in s.reason[j]
    frame = s.to_frame().set_index("summary")
    assert frame.loc["band_width_0p5", "crossing_low"] == pytest.approx(want, abs=1e-9)
    assert math.isnan(frame.loc["band_width_0p5", "lower_bound"])  # a crossing has no lower_bound
    # a reached crossing keeps the same interpolation
    j9 = s.names.index("band_width_0p9")
    assert s.crossing_low[j9] == pytest.approx(_brute_crossing(K, y, 0.92), abs=1e-9)
    assert s.crossing_high[j9] == pytest.approx(_brute_crossing(K, y, 0.88), abs=1e-9)


def test_a_crossing_not_reached_that_never_comes_near_the_level_has_no_crossing_low():
    y = 0.5 + 0.5 * np.exp(-K / 400.0)  # below 0.52 only from 400 ln 25 = 1288, beyond the window
    s = profile_summaries(K, y, thresholds=[0.5])
    j = s.names.index("band_width_0p5")
    assert s.status_of("band_width_0p5") == "not_reached"
    assert math.isnan(s.crossing_low[j]) and math.isnan(s.crossing_high[j])
    assert "crossing_low" not in s.reason[j]


def _two_cosines(k):
    """(cos(0.001 k) + cos(0.002 k)) / 2 = cos(0.0015 k) cos(0.0005 k): an exact cosine sum whose first zero is
    pi / 0.003 = 1047.2 (the first factor's)."""
    return 0.5 * (np.cos(0.001 * k) + np.cos(0.002 * k))


def test_the_lower_bound_of_an_unreached_integral_scale_is_the_integral_up_to_the_window():
    """Analysed up to 1023 the cosine sum does not cross 0 (its zero is at 1047.2): the integral scale is
    not_reached with lower_bound the trapezoidal integral of S / S(0) up to 1023 (a direct sum); analysed up to
    2047 it crosses at 1048 and its integral scale lies above that bound by the integral from 1023 to the zero."""
    k = np.arange(2048, dtype=float)
    y = _two_cosines(k)
    short = profile_summaries(k[:1024], y[:1024], thresholds=[0.5])
    long = profile_summaries(k, y, thresholds=[0.5])
    ic = short.names.index("integral_scale")
    assert short.status_of("integral_scale") == "not_reached" and math.isnan(short["integral_scale"])
    direct = sum(0.5 * (y[i] + y[i + 1]) for i in range(1023)) / y[0]  # trapezoids of S / S(0), a plain loop
    assert short.lower_bound[ic] == pytest.approx(direct, rel=1e-12)
    assert short.lower_bound[ic] == pytest.approx(np.trapezoid(y[:1024] / y[0], k[:1024]), rel=1e-12)
    assert long.status_of("zero_crossing") == "ok" and long["zero_crossing"] == 1048
    assert long.crossing[long.names.index("zero_crossing")] == pytest.approx(math.pi / 0.003, abs=0.01)
    assert long["integral_scale"] > short.lower_bound[ic]
    # the difference is the integral from 1023 to the zero crossing (S > 0 there), by the same trapezoids
    z = long.crossing[ic]
    rest = sum(0.5 * (y[i] + y[i + 1]) for i in range(1023, 1047)) + 0.5 * (z - 1047) * y[1047]
    assert long["integral_scale"] - short.lower_bound[ic] == pytest.approx(rest, rel=1e-9)
    assert math.isnan(long.lower_bound[ic])  # reached: a value, no bound
    assert "at least" in short.reason[ic] and "lower_bound" in short.reason[ic]
    assert short.to_frame().set_index("summary").loc["integral_scale", "lower_bound"] == short.lower_bound[ic]


def test_a_noisy_profile_gets_no_lower_bound():
    """A bound estimated from a noisy profile is no bound (its tail may stay above 0 by noise alone): a sampled
    profile (noise_se given) records none; the same values without noise_se (exact) do."""
    k = np.arange(512, dtype=float)
    y = _two_cosines(k)
    se = np.full(k.size, 0.01)
    noisy = profile_summaries(k, y, thresholds=[0.5], noise_se=se, n_pairs=np.full(k.size, 100.0))
    exact = profile_summaries(k, y, thresholds=[0.5])
    ic = exact.names.index("integral_scale")
    assert noisy.status_of("integral_scale") == exact.status_of("integral_scale") == "not_reached"
    assert math.isnan(noisy.lower_bound[ic]) and np.isfinite(exact.lower_bound[ic])
