"""The schema of the cross-run tables written by :func:`poslab.study.comparison.compare_runs`."""

from __future__ import annotations

from .schema import Column, Table

__all__ = ["COMPARISON", "COMPARISON_PAIRS"]

_DECAY_LENGTH = "decay length of the label (positions): its one run's, or the fit of its seeds' pooled profile"

COMPARISON = Table(
    "comparison", "label",
    "The encodings ranked by decay length, with their intervals.",
    (
        Column("rank", "Int64", "", "1 = longest decay length among the labels analysed over the same window "
               "on the same kernel scale (labels of different windows or scales are never ranked against each "
               "other; empty: no decay length)"),
        Column("n_runs", "int", "", "successful runs of the label (seeds)"),
        Column("max_distance", "int", "positions", "the window analysed (the largest of the label's runs)"),
        Column("kernel", "str", "", "the scale of its profile (summary.csv kernel): cosine or attention_prior"),
        Column("selected_model", "str", "", "selected decay model, or none"),
        Column("decay_length", "float", "positions", _DECAY_LENGTH, interval=True),
        Column("fit_se", "float", "positions", "delta-method standard error of the selected fit's decay length"),
        Column("ci_method", "str", "", "seed (seeds resampled), anchor_block (the run's bootstrap), exact (no "
               "sampling variability: the interval is left empty, see summary.csv) or none"),
        Column("ci_level", "float", "", "level of the intervals"),
        Column("n_resamples", "Int64", "", "bootstrap resamples"),
    ),
    keys="short",
)

COMPARISON_PAIRS = Table(
    "comparison_pairs", "pair of labels",
    "Whether the difference of two decay lengths exceeds its uncertainty (sampling and fit).",
    (
        Column("other_label", "str", "", "the label compared with"),
        Column("other_kind", "str", "", "its kind"),
        Column("decay_length", "float", "positions", "decay length of label"),
        Column("other_decay_length", "float", "positions", "decay length of other_label"),
        Column("difference", "float", "positions", "decay_length - other_decay_length; its bootstrap interval pairs "
               "the replicates by index (empty when both labels are exact: no sampling variability, no interval)",
               interval=True),
        Column("fit_difference_ci_low", "float", "positions", "fit (Wald) interval of the difference, low end"),
        Column("fit_difference_ci_high", "float", "positions", "fit (Wald) interval of the difference, high end"),
        Column("ci_level", "float", "", "level of the intervals"),
        Column("exceeds_uncertainty", "bool", "", "both intervals exclude 0 (both labels exact: the fit interval)"),
        Column("verdict", "str", "", "not comparable (a label has no decay length: the difference is not defined), "
               "different kernels (on different scales: cosine similarity vs an attention prior), "
               "different windows (both have one, analysed over different windows: not compared, a decay length "
               "depends on the window), not comparable (an interval of the difference is missing; both labels exact "
               "need only the fit interval), else longer, shorter or not distinguishable; checked in this order"),
        Column("reason", "str", "", "why the verdict, e.g. 'random has no decay length (no decay model accepted: "
               "flat for every model)' or which interval of the difference includes 0"),
    ),
    keys="short",
)
