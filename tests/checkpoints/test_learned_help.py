"""What `poslab encodings learned` says learned accepts is what a study accepts."""

import tomllib

import pytest
from click.testing import CliRunner

from poslab.cli import main
from poslab.data import bundled_run_path
from poslab.encodings import make_encoding
from poslab.study import StudyError, parse_study


def _parse(entry: str, n_positions: int = 16):
    text = f'name = "h"\nn_positions = {n_positions}\ndim = 8\n[[encodings]]\nkind = "learned"\n{entry}'
    return parse_study(tomllib.loads(text))


def test_encodings_learned_lists_learned_only_and_says_what_each_parameter_accepts():
    out = CliRunner().invoke(main, ["encodings", "learned"])
    assert out.exit_code == 0, out.output
    assert "learned  (poslab.encodings.learned.Learned)" in out.output and "rotary" not in out.output
    assert ('step: an integer >= 0, or omitted (None), default: none (a training-run folder needs one; the bundled '
            'trained-char-lm is then its last step) — a saved step of a training-run source; in a study file also a '
            'list of steps, or "all" for every saved step') in out.output
    assert "offset: an integer >= 0, or omitted (None)" in out.output
    assert "source is a bundled table, a weights file" in out.output and "a Hub id ORG/NAME[@REVISION]" in out.output
    assert "n_positions = N (an integer >= 2, at most the study's n_positions)" in out.output
    bad = CliRunner().invoke(main, ["encodings", "learned", "nope"])
    assert bad.exit_code == 2 and "unknown kind(s) 'nope'; registered kinds: " in bad.output


def test_the_help_text_is_true():
    """Each claim of the listing above, checked against the study parser and the encoding."""
    run = bundled_run_path("trained-char-lm")
    steps = [0, 30, 100, 200, 400, 800, 1500]
    assert [e.step for e in _parse('source = "trained-char-lm"\nstep = "all"\n').encodings] == steps
    assert [e.step for e in _parse('source = "trained-char-lm"\nstep = [0, 30]\n').encodings] == [0, 30]
    assert [e.step for e in _parse(f'source = "{run}"\nstep = "all"\n').encodings] == steps
    assert _parse('source = "trained-char-lm"\n').encodings[0].step is None  # the bundled run: its last step
    with pytest.raises(StudyError, match="is a training run .*choose step = one of 0, 30"):
        _parse(f'source = "{run}"\n')
    for name in ("step", "offset"):
        with pytest.raises(ValueError, match=f"{name} must be an integer >= 0, or omitted"):
            make_encoding("learned", source="gpt2", **{name: -1})
    assert len(_parse('source = "gpt2"\nn_positions = 2\n').encodings) == 1
    for bad, why in ((1, "an integer >= 2"), (17, "exceeds the study's n_positions = 16")):
        with pytest.raises(StudyError, match=why):
            _parse(f'source = "gpt2"\nn_positions = {bad}\n')
    help_text = CliRunner().invoke(main, ["inspect", "--help"]).output
    assert "exits 2 with the study's message" in " ".join(help_text.split())
