"""comparison_pairs.csv: verdicts on model-free summaries hold at every common window, or say they do not.

Replaces the decay-length verdicts of issue 12 (a decay length measures the window for a profile without a
scale, so its verdicts reversed between n_positions 512 and 1024; issue 13 item 5).
"""

import math

import numpy as np
import pytest

from poslab.study import parse_study, run_study
from poslab.study.comparison import summary_verdict

NAN = math.nan
S = "band_width_0p5"


def _label(name, windows, *, own=None, exact=False, interval=(NAN, NAN), conditioning=None, replicates=None,
           crossing_low=None):
    """A label's summary S at each window: {window: value or "not_reached" or another status}; ``crossing_low``:
    an exact label's first distance below the level + 0.02 (summaries.csv, ⌈crossing_low⌉)."""
    rows = {}
    for w, v in windows.items():
        rows[w] = {S: (v, "ok")} if isinstance(v, (int, float)) else {S: (NAN, v)}
    out = {"label": name, "windows": rows, "max_distance": own or max(windows), "exact": exact,
           "interval": {S: interval}, "conditioning": conditioning or {}, "replicates": {},
           "crossing_low": {S: crossing_low} if crossing_low is not None else {}}
    if replicates is not None:
        out["replicates"][S] = np.asarray(replicates, dtype=float)
    return out


CASES = [
    # exact against sampled: the exact value outside the sampled interval at the sampled label's own window,
    # the same sign at the smaller windows
    ("longer", "exceeds its uncertainty at window(s) 1023; the same sign at 255, 511",
     _label("gpt2", {255: 74, 511: 89, 1023: 97}, interval=(92, 101)),
     _label("sin", {255: 55, 511: 55, 1023: 55}, exact=True)),
    ("not distinguishable", "within its uncertainty at window(s) 1023",
     _label("gpt2", {255: 74, 511: 89, 1023: 97}, interval=(92, 101)),
     _label("x", {255: 60, 511: 80, 1023: 95}, exact=True)),
    # the sign changes between windows: window-dependent, whatever the intervals
    ("window-dependent", "the sign of the difference changes with the window",
     _label("gpt2", {255: 50, 511: 89, 1023: 97}, interval=(92, 101)),
     _label("y", {255: 60, 511: 60, 1023: 60}, exact=True)),
    # two exact labels differ wherever they differ; not reached lies beyond the window (the larger)
    ("shorter", "exceeds its uncertainty at window(s) 1023 (255: 55 vs > 255; 511: 55 vs 166; 1023: 55 vs 166; "
                "both exact: judged at 1023",
     _label("sin", {255: 55, 511: 55, 1023: 55}, exact=True),
     _label("rope", {255: "not_reached", 511: 166, 1023: 166}, exact=True)),
    # two exact labels are judged where both see the farthest (modern_llms, e_folding_distance): Llama 3.1's
    # ill-conditioned 1146 (a ±0.02 change of the level: 505-2125) is "> 1023" at window 1023, where it has no
    # range; judged at every window this was "window-dependent" (exceeds at 1023 but not at 2047, 4095)
    ("not distinguishable", "both are exact and differ, but a change of ±0.02 in the level moves llama's over "
                            "505-2125 and scout's over 412-620 (ill-conditioned crossings), and these overlap",
     _label("llama", {1023: "not_reached", 2047: 1146, 4095: 1146}, exact=True, conditioning={S: (505, 2125)}),
     _label("scout", {1023: 505, 2047: 505, 4095: 505}, exact=True, conditioning={S: (412, 620)})),
    # Gemma 3's global layers against Qwen3-VL (1643, 1562-2090): "> 2047" overlaps that range, "> 4095" does not
    ("longer", "exceeds its uncertainty at window(s) 4095",
     _label("gemma", {1023: "not_reached", 2047: "not_reached", 4095: "not_reached"}, exact=True),
     _label("qwen", {1023: "not_reached", 2047: 1643, 4095: 1643}, exact=True, conditioning={S: (1562, 2090)})),
    # an exact crossing beyond the window whose level + 0.02 is crossed inside it (QA: "> 1023" against 996 while
    # S falls below the level + 0.02 at 909): the range (909, inf) holds 996; one that stays above keeps "longer"
    ("not distinguishable", "a's crossing lies beyond window 1023, but a change of +0.02 in the level brings it back "
                            "to 909 (crossing_low), so its range, 909 to beyond the window, meets b's 996",
     _label("a", {1023: "not_reached"}, exact=True, crossing_low=909), _label("b", {1023: 996}, exact=True)),
    ("longer", "exceeds its uncertainty at window(s) 1023",
     _label("a", {1023: "not_reached"}, exact=True), _label("b", {1023: 996}, exact=True)),
    # ... at a smaller window too (an exact profile there is its truncation): against a sampled label's interval
    # at its quarter window the range (200, inf) is not beyond (225, 235); at 1023, 300 is beyond (235, 245)
    ("window-dependent", "exceeds its uncertainty at window(s) 1023 but not at 255",
     _label("a", {255: "not_reached", 1023: 300}, exact=True, crossing_low=200),
     _label("b", {255: 230, 1023: 240}, interval=(235, 245)) | {"window_intervals": {255: {S: (225, 235)}}}),
    ("longer", "exceeds its uncertainty at window(s) 255, 1023",
     _label("a", {255: "not_reached", 1023: 300}, exact=True, crossing_low=290),
     _label("b", {255: 230, 1023: 240}, interval=(235, 245)) | {"window_intervals": {255: {S: (225, 235)}}}),
    # an ill-conditioned exact crossing is uncertain by its conditioning range
    ("not distinguishable", "within its uncertainty",
     _label("a", {511: 150, 1023: 150}, exact=True),
     _label("rope", {511: 166, 1023: 166}, exact=True, conditioning={S: (135, 203)})),
    # a degenerate profile at any common window: not comparable, saying why
    ("not comparable", "random is flat at window 255",
     _label("sin", {255: 55, 1023: 55}, exact=True), _label("random", {255: "flat", 1023: "flat"})),
    # both beyond every common window
    ("not comparable", "no sign at any common window: both lie beyond the window at window 255",
     _label("a", {255: "not_reached"}, exact=True), _label("b", {255: "not_reached"}, exact=True)),
    # the case of each window, said once for the windows it holds at
    ("not comparable", "no sign at any common window: both lie beyond the window at windows 255, 511",
     _label("a", {255: "not_reached", 511: "not_reached"}), _label("b", {255: "not_reached", 511: "not_reached"})),
    ("not comparable", "no sign at any common window: a is within the noise at window 255; both lie beyond the "
                       "window at window 511",
     _label("a", {255: "within_noise", 511: "not_reached"}), _label("b", {255: "not_reached", 511: "not_reached"})),
    # different windows meet at their common one (a 256-position run against a 1024-position run's quarter)
    ("not comparable", "gpt2 has none at window 255",
     _label("gpt2", {255: 74, 511: 89, 1023: 97}, interval=(92, 101)),
     _label("trained", {63: 2, 127: 2, 255: 2}, interval=(2, 2))),
    ("shorter", "exceeds its uncertainty at window(s) 255; the same sign at 63, 127",
     _label("trained", {63: 2, 127: 2, 255: 2}, interval=(2, 2)),
     _label("sin", {63: 55, 127: 55, 255: 55, 511: 55, 1023: 55}, exact=True)),
    # no common window at all
    ("not comparable", "no common window", _label("a", {100: 3}, exact=True), _label("b", {200: 4}, exact=True)),
    # two sampled labels at their common own window: paired replicates decide
    ("longer", "exceeds its uncertainty at window(s) 255",
     _label("a", {255: 30}, interval=(20, 40), replicates=np.linspace(25, 35, 60)),
     _label("b", {255: 20}, interval=(15, 35), replicates=np.linspace(15, 25, 60)[::-1])),
    ("window-dependent", "exceeds its uncertainty at window(s) 255 but not at 511",
     _label("a", {255: 30, 511: 30}, exact=True), _label("b", {255: 20, 511: 30}, interval=(25, 35))
     | {"window_intervals": {255: {S: (18, 22)}}}),
    # a sampled label without an interval at a smaller window (no bootstrap there): judged at its own window only
    ("not distinguishable", "within its uncertainty at window(s) 511",
     _label("a", {255: 30, 511: 30}, exact=True), _label("b", {255: 20, 511: 28}, own=511, interval=(25, 31))),
    # with an interval at its smaller window (window_sensitivity.csv) it is judged there too
    ("window-dependent", "exceeds its uncertainty at window(s) 511 but not at 255",
     _label("a", {255: 30, 511: 40}, exact=True),
     _label("b", {255: 20, 511: 28}, own=511, interval=(25, 31)) | {"window_intervals": {255: {S: (15, 35)}}}),
    ("longer", "exceeds its uncertainty at window(s) 255, 511",
     _label("a", {255: 30, 511: 40}, exact=True),
     _label("b", {255: 20, 511: 28}, own=511, interval=(25, 31)) | {"window_intervals": {255: {S: (18, 22)}}}),
    # paired replicates at a smaller window (bootstrap.csv rows of that window)
    ("longer", "exceeds its uncertainty at window(s) 255, 511",
     _label("a", {255: 30, 511: 30}, interval=(20, 40), replicates=np.linspace(25, 35, 60))
     | {"window_intervals": {255: {S: (20, 40)}}, "window_replicates": {255: {S: np.linspace(25, 35, 60)}}},
     _label("b", {255: 20, 511: 20}, interval=(15, 35), replicates=np.linspace(15, 25, 60)[::-1])
     | {"window_intervals": {255: {S: (15, 35)}}, "window_replicates": {255: {S: np.linspace(15, 25, 60)[::-1]}}}),
    # within the noise at one window: no sign there, the verdict rests on the others
    ("shorter", "exceeds its uncertainty at window(s) 1023 (511: noise vs > 511",
     _label("gpt2", {511: "within_noise", 1023: 164}, interval=(158, 173)),
     _label("sin", {511: "not_reached", 1023: "not_reached"}, exact=True)),
    ("not comparable", "no sign at any common window: a is within the noise at window 511",
     _label("a", {511: "within_noise"}, interval=(NAN, NAN)), _label("b", {511: 100}, exact=True)),
]


@pytest.mark.parametrize("verdict, reason, a, b", CASES)
def test_each_verdict_says_its_true_reason(verdict, reason, a, b):
    got = summary_verdict(a, b, S)
    assert got["verdict"] == verdict and reason in got["reason"], got
    assert got["exceeds_uncertainty"] == (verdict in ("longer", "shorter"))
    flipped = summary_verdict(b, a, S)["verdict"]
    assert flipped == {"longer": "shorter", "shorter": "longer"}.get(verdict, verdict)


def test_a_study_compares_runs_of_different_windows_on_their_common_window():
    """A 64-position run meets 128-position runs at their quarter / half windows instead of being refused;
    a random (flat) label is not comparable and says why."""
    spec = parse_study({"name": "v", "n_positions": 128, "dim": 16, "seeds": [0],
                        "analysis": {"heatmap_bins": 8, "n_resamples": 40},
                        "encodings": [{"kind": "sinusoidal"}, {"kind": "sinusoidal", "base": 50.0},
                                      {"kind": "random", "n_positions": 64}]})
    result = run_study(spec, progress=False, executor="serial")
    pairs = result.comparison_pairs
    rows = pairs[(pairs["other_label"] == "random")]
    assert (rows["verdict"] == "not comparable").all()
    assert rows["reason"].str.contains("random is flat at window").all()
    assert set(rows["windows"]) == {"31;63"}  # 15, 31, 63 (random) and 31, 63, 127 (the others) share 31 and 63
    same = pairs[(pairs["label"] == "sinusoidal") & (pairs["other_label"] == "sinusoidal(base=50)")]
    assert set(same["windows"]) == {"31;63;127"}
    differ = same[same["difference"].abs() > 0]  # two exact labels: every difference counts, at the largest window
    assert len(differ) and differ["verdict"].isin(["longer", "shorter", "not distinguishable"]).all()
    assert (same["window"] == 127).all()
    comparison = result.tables()["comparison"]
    assert set(comparison["summary"]) >= {"band_width_0p9", "e_folding_distance", "integral_scale", "decay_length"}
    assert comparison.loc[comparison["summary"] == "decay_length", "rank"].isna().all()


def test_verdicts_do_not_reverse_when_the_window_changes():
    """Issue 13 "done when", in small: the same three encodings at n_positions 64, 128 and 256 give no pair a
    verdict 'longer' at one size and 'shorter' at another (the decay-length verdicts did: README). The default
    study at 256 / 512 / 1024 is measured in the README (56 of 60 verdicts identical, none reversed)."""
    verdicts = {}
    for n in (64, 128, 256):
        spec = parse_study({"name": "v", "n_positions": n, "dim": 64, "analysis": {"heatmap_bins": 8, "n_resamples": 40},
                            "encodings": [{"kind": "sinusoidal"}, {"kind": "rotary", "rope_theta": 500000.0},
                                          {"kind": "learned", "source": "gpt2"}]})
        pairs = run_study(spec, progress=False, executor="serial").comparison_pairs
        verdicts[n] = pairs.set_index(["label", "other_label", "summary"])["verdict"]
    for key in verdicts[64].index:
        seen = {verdicts[n][key] for n in verdicts}
        assert not {"longer", "shorter"} <= seen, (key, seen)


def test_an_integral_scale_beyond_the_window_has_no_sign():
    """QA (stop 26): an integral scale whose zero crossing lies beyond the window was ranked "longer" than a
    reached one (RoPE, rope_theta 1956, rotary_dim 2048 against rope_theta 53749, rotary_dim 32 at 1024 positions:
    "> 1023" against 372.5), and the same pair at 4096 positions gave 148.1, "shorter": its value integrates S up
    to a crossing beyond the window, which need not be a value beyond the window."""
    name = "integral_scale"

    def label(label, values, **extra):
        windows = {w: {name: (v, "ok") if isinstance(v, float) else (NAN, v)} for w, v in values.items()}
        return {"label": label, "windows": windows, "max_distance": max(values), "exact": True, "interval": {},
                "conditioning": {}, "replicates": {}} | extra

    a = label("wide", {255: "not_reached", 511: "not_reached", 1023: "not_reached"})
    b = label("narrow", {255: "not_reached", 511: "not_reached", 1023: 372.5})
    got = summary_verdict(a, b, name)
    assert got["verdict"] == "not comparable" and not got["exceeds_uncertainty"], got
    assert "crossing > 1023 vs 372.5" in got["reason"] and "wide's integral scale has its zero crossing beyond " \
        "the window and no lower bound (none recorded: lower_bound is empty), so it may lie either side of narrow's " \
        "372.5 at window 1023" in got["reason"]
    # with its lower bound (the integral up to the window: at 4096 positions it was 148.1, so the bound at 1023 lies
    # below that): no sign still, saying the bound does not settle it
    got = summary_verdict(a | {"lower_bound": {name: 140.0}}, b, name)
    assert got["verdict"] == "not comparable", got
    assert "1023: > 140 (integral up to 1023) vs 372.5" in got["reason"]
    assert "wide's integral scale, beyond its lower bound 140 (the integral up to the window), may lie either side " \
        "of narrow's 372.5: the bound does not settle it at window 1023" in got["reason"]
    # two reached integral scales still compare
    assert summary_verdict(label("x", {1023: 400.0}), b, name)["verdict"] == "longer"


def test_an_unreached_integral_scale_is_compared_by_its_lower_bound():
    """An exact label's integral scale beyond the window exceeds its integral up to the window (lower_bound): it is
    longer than a label whose upper end (interval, range, value) lies below that bound, else no sign, naming why;
    a sampled label's unreached integral scale has no bound (estimated with noise) and no sign."""
    name = "integral_scale"

    def label(label, values, *, exact=True, **extra):
        windows = {w: {name: (v, "ok") if isinstance(v, float) else (NAN, v)} for w, v in values.items()}
        return {"label": label, "windows": windows, "max_distance": max(values), "exact": exact, "interval": {},
                "conditioning": {}, "replicates": {}} | extra

    wide = label("wide", {1023: "not_reached"}, lower_bound={name: 150.0})
    got = summary_verdict(wide, label("gpt2", {1023: 100.0}, exact=False, interval={name: (90.0, 120.0)}), name)
    assert got["verdict"] == "longer" and got["exceeds_uncertainty"], got
    assert "1023: > 150 (integral up to 1023) vs 100" in got["reason"]
    got = summary_verdict(label("gpt2", {1023: 100.0}, exact=False, interval={name: (90.0, 160.0)}), wide, name)
    assert got["verdict"] == "not comparable", got
    assert "wide's integral scale, beyond its lower bound 150 (the integral up to the window), may lie either side " \
           "of gpt2's 100 (up to 160, the upper end of its interval): the bound does not settle it at window 1023" \
        in got["reason"]
    # an exact label's ill-conditioned range: its upper end decides
    got = summary_verdict(wide, label("rope", {1023: 100.0}, conditioning={name: (80.0, 170.0)}), name)
    assert got["verdict"] == "not comparable" and "up to 170, the upper end of its range" in got["reason"], got
    # at a smaller window the bound recorded there (window_sensitivity.csv) decides
    nested = label("wide", {255: "not_reached", 1023: "not_reached"}, lower_bound={name: 150.0},
                   window_bounds={255: {name: 60.0}, 1023: {name: 150.0}})
    trained = label("trained", {255: 16.7}, exact=False, interval={name: (15.0, 19.0)})
    got = summary_verdict(nested, trained, name)
    assert got["verdict"] == "longer" and "255: > 60 (integral up to 255) vs 16.7" in got["reason"], got
    # a sampled label's unreached integral scale: no bound, no sign
    got = summary_verdict(label("noisy", {1023: "not_reached"}, exact=False), label("b", {1023: 10.0}), name)
    assert got["verdict"] == "not comparable"
    assert "noisy's integral scale has its zero crossing beyond the window and no lower bound (none for a " \
           "sampled label: a bound estimated with noise is no bound)" in got["reason"]
    # both beyond the window
    got = summary_verdict(wide, label("other", {1023: "not_reached"}, lower_bound={name: 400.0}), name)
    assert got["verdict"] == "not comparable"
    assert "no sign at any common window: both zero crossings of the integral scales lie beyond the window at window " \
        "1023" \
        in got["reason"]


def test_a_sampled_summary_beyond_the_window_has_no_uncertainty_without_a_bootstrap():
    """A sampled label's "not reached" is beyond the window with certainty only where its resamples say so: with
    n_resamples = 0 (no replicates) a smoothed_random first minimum "> 255" against sinusoidal's 22 was "longer,
    exceeds its uncertainty at window 255" (W, stop 27); now not comparable. With resamples it stands."""
    sampled = _label("smooth", {63: "not_reached", 127: "not_reached", 255: "not_reached"})
    exact = _label("sin", {63: 22, 127: 22, 255: 22}, exact=True)
    out = summary_verdict(sampled, exact, S)
    assert out["verdict"] == "not comparable" and "smooth has none at window 63, 127, 255" in out["reason"]
    resampled = _label("smooth", {63: "not_reached", 127: "not_reached", 255: "not_reached"},
                       replicates=[np.inf] * 200)
    assert summary_verdict(resampled, exact, S)["verdict"] == "longer"
