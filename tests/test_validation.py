"""The one validation mechanism: constraints that check and describe, one message style."""

import pytest

from poslab._validation import (AnyOf, Boolean, Choice, Integer, ListOf, NoneValue, Real, Text, ValidationError, check,
                                constraint_for, missing_message)
from poslab.encodings import ParameterError, make_encoding
from poslab.training import TrainConfig


@pytest.mark.parametrize("constraint, good, converted", [
    (Integer(minimum=1), 3, 3),
    (Real(minimum=0, open_min=True), 2, 2.0),
    (Boolean(), True, True),
    (Choice(("a", "b")), "b", "b"),
    (ListOf(Real(minimum=-1, maximum=1), distinct=True), [0.5, 0], (0.5, 0.0)),
    (AnyOf((Integer(), NoneValue())), None, None),
    (Text(), "x", "x"),
])
def test_accepted_values_are_converted(constraint, good, converted):
    value = check(good, constraint, "x")
    assert value == converted and type(value) is type(converted)


@pytest.mark.parametrize("constraint, bad, text", [
    (Integer(minimum=1), 0, "n must be an integer >= 1, got 0"),
    (Integer(minimum=1), True, "n must be an integer >= 1, got True"),
    (Integer(minimum=1), 1.0, "n must be an integer >= 1, got 1.0"),
    (Real(minimum=0, maximum=1, open_min=True, open_max=True), 1, "n must be a finite number in (0, 1), got 1"),
    (Real(), float("nan"), "n must be a finite number, got nan"),
    (Boolean(), 1, "n must be true or false, got 1"),
    (Choice((1, 2)), True, "n must be one of 1, 2, got True"),
    (ListOf(Integer(), distinct=True), [1, 1], "n must be a non-empty list of distinct values, each an integer, got [1, 1]"),
    (ListOf(Integer()), [], "n must be a non-empty list of values, each an integer, got []"),
    (AnyOf((Real(), NoneValue())), "x", "n must be a finite number, or omitted (None), got 'x'"),
])
def test_refusals_say_where_what_was_expected_and_what_was_given(constraint, bad, text):
    with pytest.raises(ValidationError) as info:
        check(bad, constraint, "n", where="s.toml: [analysis]", fix="see the README")
    assert str(info.value) == f"s.toml: [analysis]: {text}; see the README"


def test_annotations_become_constraints():
    assert constraint_for(int | None).describe() == "an integer, or omitted (None)"
    assert missing_message("learned", "source", constraint_for(str)) == \
        'learned: source is required (a string); write source = "..."'


def test_a_missing_required_encoding_parameter_names_itself_and_what_to_write():
    with pytest.raises(ParameterError, match=r'^learned: source is required \(a string\); write source = "\.\.\."$'):
        make_encoding("learned")


def test_training_options_use_the_same_mechanism():
    with pytest.raises(ValidationError, match=r"^train: heads must be an integer >= 1, got 0$"):
        TrainConfig(heads=0)
    with pytest.raises(ValidationError, match=r"^train: lr must be a finite number > 0, got -1\.0$"):
        TrainConfig(lr=-1.0)
    with pytest.raises(ValidationError, match=r"train: d_model must be a multiple of heads \(3\), got 128"):
        TrainConfig(heads=3)
