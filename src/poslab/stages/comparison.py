"""The schema of the cross-run tables written by :func:`poslab.study.comparison.compare_runs`."""

from __future__ import annotations

from .schema import Column, Table

__all__ = ["COMPARISON", "COMPARISON_PAIRS"]

COMPARISON = Table(
    "comparison", "label × summary",
    "Each label's model-free summaries (and its decay length), ranked among the labels analysed over the same "
    "window, with their intervals.",
    (
        Column("summary", "str", "", "band_width_<t>, e_folding_distance, zero_crossing, first_minimum, "
               "integral_scale (summary.csv's columns), or decay_length (the selected fit's; not ranked)",
               required=True),
        Column("rank", "Int64", "", "1 = the largest value (similarity reaching farthest) among the labels analysed "
               "up to the same max_distance on the same kernel scale (its rank group); a summary not reached within the "
               "window ranks first (it is larger), except an integral scale, whose value may lie below the window: an "
               "exact label's ranks by its lower bound (summaries.csv lower_bound, the integral up to the window), "
               "a sampled label's is not ranked; empty: no value (degenerate profile, undefined) and for "
               "decay_length"),
        Column("rank_best", "Int64", "", "the best rank the verdicts (comparison_pairs.csv) allow: 1 + the labels of "
               "its rank group (the ranked labels of the same summary, max_distance and kernel) established as "
               "longer than this one; labels not distinguishable, window-dependent or not comparable may lie "
               "either side; empty: not ranked, or alone in its group (compared with no one)"),
        Column("rank_worst", "Int64", "", "the worst rank they allow: the number of ranked labels in its group - the "
               "labels this one is established as longer than. rank_best = rank_worst: its place among them is "
               "established; a range: some order is not (equal exact values, overlapping intervals, a difference "
               "that depends on the window, two summaries both beyond the window)"),
        Column("n_runs", "int", "", "successful runs of the label (seeds)"),
        Column("max_distance", "int", "positions", "the window analysed (the largest of the label's runs)"),
        Column("kernel", "str", "", "the scale of its profile (summary.csv kernel): cosine or attention_prior"),
        Column("value", "float", "positions", "the summary of the label: its one run's, or that of its seeds' "
               "pooled profile (its interval: the seed bootstrap's, a resample beyond the window or within the "
               "noise counted as beyond it: high end empty when the upper quantile lies there)", interval=True),
        Column("status", "str", "", "ok, not_reached (within max_distance), undefined, or the profile's degenerate "
               "status (too_few_points, flat, rising, no_decay); for decay_length: ok or none"),
        Column("window_dependent", "str", "", "yes: the summary moves with the window. Between two of a quarter, "
               "half and all of the window it moves by more than 5 % and one position and, where the windows have "
               "intervals, one window's value lies outside the other's interval (open above: no upper end); or it is a number "
               "at a smaller window and not at a larger one, unless its interval at the smaller window is open "
               "above. A single run: its own flag (summary.csv, window_sensitivity.csv: anchor-block intervals; "
               "exact: the tolerances alone). A label with seeds: the same rule on its pooled profile (the value "
               "reported here) cut to each window's distances (profiles.csv: every position averaged), with "
               "seed-bootstrap intervals there (the same seed resamples, cut); not any seed's flag. no: none of these; empty for decay_length (not measured at the smaller "
               "windows)"),
        Column("selected_model", "str", "", "decay_length rows: the selected decay model, or none"),
        Column("fit_se", "float", "positions", "decay_length rows: delta-method standard error of the fit"),
        Column("ci_method", "str", "", "seed (seeds resampled), anchor_block (the run's bootstrap), exact (no "
               "sampling variability: the interval is left empty) or none"),
        Column("ci_level", "float", "", "level of the intervals"),
        Column("n_resamples", "Int64", "", "bootstrap resamples"),
    ),
    keys="short",
)

COMPARISON_PAIRS = Table(
    "comparison_pairs", "pair of labels × summary",
    "Whether one label's model-free summary exceeds another's beyond their uncertainty, at every window both were "
    "analysed over, with the same sign.",
    (
        Column("other_label", "str", "", "the label compared with"),
        Column("other_kind", "str", "", "its kind"),
        Column("summary", "str", "", "the summary compared (summary.csv's column name)", required=True),
        Column("window", "Int64", "positions", "the largest common window (max_distance) the verdict's interval is "
               "judged at"),
        Column("windows", "str", "positions", "every common window compared (';'-separated max_distances: a quarter, "
               "half and all of each label's window, window_sensitivity.csv)"),
        Column("value", "float", "positions", "label's summary at window (empty: not a number there); a label "
               "with seeds: its pooled profile's, cut to the window (at its own window comparison.csv's value)"),
        Column("other_value", "float", "positions", "other_label's summary at window (as value)"),
        Column("difference", "float", "positions", "value - other_value; its bootstrap interval pairs the two labels' "
               "replicates by index (empty unless both are bootstrapped at window)", interval=True),
        Column("ci_level", "float", "", "level of the intervals"),
        Column("exceeds_uncertainty", "bool", "", "the verdict is longer or shorter"),
        Column("verdict", "str", "", "longer / shorter (the difference exceeds its uncertainty wherever an interval "
               "is known and keeps its sign at every common window); window-dependent (its sign changes between "
               "common windows, or it exceeds its uncertainty at one and not at another); not distinguishable; not "
               "comparable (a label's summary is no number at a common window, or no common window); different "
               "kernels (one is a cosine similarity, the other a bias's attention prior: levels of different "
               "quantities); checked in the order: different kernels, not comparable, window-dependent, longer / "
               "shorter, not distinguishable"),
        Column("reason", "str", "", "why the verdict, with the values at each window"),
    ),
    keys="short",
)
