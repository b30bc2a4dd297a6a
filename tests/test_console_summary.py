"""The console summary of `poslab run` (QA report, items 2 and 3): ill-conditioned crossings are flagged as
summaries.csv flags them, with their range, and every marker printed is explained under the table, only those."""

import re

import numpy as np
import pytest

from poslab.cli import _FOOTNOTES, _summary_text
from poslab.study import parse_study, run_study

ROPE = "rotary(rope_theta=500000, rotary_dim=128)"


@pytest.fixture(scope="module")
def exact():
    """Sinusoidal and the default study's RoPE head at its 1024 positions: exact kernels, ill-conditioned crossings."""
    spec = parse_study({"name": "ill", "n_positions": 1024, "dim": 768,
                        "encodings": [{"kind": "sinusoidal"}, {"kind": "rotary", "rope_theta": 500000.0, "rotary_dim": 128}]})
    return run_study(spec, progress=False, executor="serial")


@pytest.fixture(scope="module")
def sampled():
    spec = parse_study({"name": "sampled", "n_positions": 96, "dim": 32, "analysis": {"n_resamples": 40},
                        "encodings": [{"kind": "smoothed_random", "length_scale": 4.0}, {"kind": "random"}]})
    return run_study(spec, progress=False, executor="serial")


def _split(text):
    """(the table, the footnotes' markers): footnotes are the unindented lines from the first that starts like one."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if any(line.startswith(n.split(": ")[0] + ":") for n in _FOOTNOTES.values()))
    return "\n".join(lines[:first]), [line.split(": ")[0] for line in lines[first:] if not line.startswith("  ")]


def _notes(text):
    return _split(text)[1]


def test_ill_conditioned_crossings_are_flagged_with_their_range(exact):
    text = _summary_text(exact.summary)
    summaries = exact.frames["summaries"]
    ill = summaries[summaries["ill_conditioned"].astype(bool)]
    assert {(r.label, r.summary) for r in ill.itertuples()} == {
        ("sinusoidal", "e_folding_distance"), (ROPE, "band_width_0p5"), (ROPE, "e_folding_distance")}
    for r in ill.itertuples():  # the console shows the number and the range summaries.csv holds, as the README does
        assert f"{r.value:.0f} (ill-conditioned: {r.crossing_low:.0f}–{r.crossing_high:.0f})" in text
    assert "185 (ill-conditioned: 154–221)" in text and "166 (ill-conditioned: 135–203)" in text
    assert len(re.findall(r"\(ill-conditioned: \d", text)) == 3 and "55 (exact)" in text  # well-conditioned exact ones stay (exact)
    # the first minima of the exact cosine sums are ripples, as the README's table and comparison_pairs.csv say
    assert "787 (ripple, 0.05)" in text and "34 (ripple, 0.06)" in text
    assert _notes(text) == ["(exact)", "(ripple, d)", "(ill-conditioned", "> N", "-"]  # + the range, > 1023, the integral
    assert max(map(len, text.splitlines())) <= 80


def test_an_exact_run_draws_no_resamples(exact, sampled):
    assert (exact.summary["ci_method"] == "exact").all() and (exact.summary["n_resamples"] == 0).all()
    assert (sampled.summary["ci_method"] == "anchor_block").all() and (sampled.summary["n_resamples"] == 40).all()


#: how each footnote's marker looks in the table
MARKS = {"(exact)": r"\(exact\)", "(ripple, d)": r"\(ripple, \d", "(ill-conditioned": r"\(ill-conditioned: \d", "ends at a–b":
         r"\(ill-conditioned: ends at \d", "[low, >]": r", >\]", "*": r"\*",
         "> N": r" > \d", "flat": r" flat( |$)", "noise": r" noise( |$)", "n/a": r" n/a( |$)", "-": r" -( |$)"}


def _check(text):
    body, notes = _split(text)
    for mark, pattern in MARKS.items():
        assert (mark in notes) == bool(re.search(pattern, body, re.M)), (mark, text)
    assert max(map(len, text.splitlines())) <= 80
    return notes


def test_each_marker_printed_is_explained_and_only_those(exact, sampled):
    summary = sampled.summary
    notes = _check(_summary_text(summary))
    assert "flat" in notes and "(exact)" not in notes and "(ill-conditioned" not in notes
    _check(_summary_text(exact.summary))
    # an interval open above, and a failed run, bring their footnotes; a table without them, none
    smooth = summary[summary["label"].str.startswith("smoothed")].copy()
    assert "flat" not in _check(_summary_text(smooth))
    smooth["band_width_0p5_ci_high"] = np.nan
    assert "[low, >]" in _check(_summary_text(smooth))
    # a sampled run's ill-conditioned crossing keeps its interval, then its range
    ill = smooth.assign(summary_notes="e_folding_distance: ill_conditioned (S comes back above the level 2 time(s) "
                        "after its first crossing, and a change of ±0.02 in the level moves that crossing from 3.2 to 9.7)")
    text = _summary_text(ill)
    assert re.search(r"\d+ \[\d+, \d+\] \(ill-conditioned: 3–10\)", text) and "(ill-conditioned" in _check(text)
    # an integral scale ending at an ill-conditioned zero crossing shows the crossing's range as such
    reason = ("S comes back above the level 5 time(s) after its first crossing, and a change of ±0.02 in the level "
              "moves that crossing from 40.2 to 61.7")
    ended = smooth.assign(zero_crossing=50, integral_scale=21.5, zero_crossing_ci_low=44, zero_crossing_ci_high=58,
                          summary_notes=f"zero_crossing: ill_conditioned ({reason}); integral_scale: ill_conditioned "
                                        f"(it ends at the zero crossing, which is ill-conditioned: {reason})")
    text = _summary_text(ended)
    assert re.search(r"21\.5 \[[^]]*\] \(ill-conditioned: ends at 40–62\)", text)
    assert "50 [44, 58] (ill-conditioned: 40–62)" in text
    assert _check(text)[:2] == ["(ill-conditioned", "ends at a–b"]
    failed = smooth.assign(status="failed")
    assert _check(_summary_text(failed)) == ["-"]
