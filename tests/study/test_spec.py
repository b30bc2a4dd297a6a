import textwrap

import pytest

from poslab.study import StudyError, default_study_path, load_study, parse_study


def write(tmp_path, text, name="s.toml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


BASE = """
name = "t"
n_positions = 64
dim = 16
seeds = [0, 1, 2]
"""


def test_default_study_is_packaged_and_valid():
    spec = load_study(default_study_path())
    assert (spec.n_positions, spec.dim, spec.max_distance, spec.seeds) == (1024, 768, 1023, (0, 1, 2))
    labels = [r.label for r in spec.runs()]
    assert labels == ["learned(source=gpt2)", "sinusoidal", "random", "random", "random",
                      "rotary(rope_theta=500000, rotary_dim=128)", "learned(source=trained-char-lm)"]
    assert [r.seed for r in spec.runs()] == [None, None, 0, 1, 2, None, None]
    # the table trained here is analysed on its own 256 positions
    assert [(r.n_positions, r.max_distance) for r in spec.runs()] == [(1024, 1023)] * 6 + [(256, 255)]


def test_an_entry_may_analyse_a_shorter_window(tmp_path):
    spec = load_study(write(tmp_path, BASE + """
        [[encodings]]
        kind = "sinusoidal"
        n_positions = 20

        [[encodings]]
        kind = "random"
    """))
    assert [(r.label, r.n_positions, r.max_distance) for r in spec.runs()] == [
        ("sinusoidal", 20, 19), ("random", 64, 63), ("random", 64, 63), ("random", 64, 63)]
    with pytest.raises(StudyError, match="entry 1 \\(kind = 'sinusoidal'\\): n_positions = 65 exceeds the study's n_positions = 64"):
        load_study(write(tmp_path, BASE + '[[encodings]]\nkind = "sinusoidal"\nn_positions = 65\n'))
    with pytest.raises(StudyError, match="entry 1 \\(kind = 'sinusoidal'\\): n_positions must be an integer >= 2, got 1"):
        load_study(write(tmp_path, BASE + '[[encodings]]\nkind = "sinusoidal"\nn_positions = 1\n'))


def test_grid_expands_lists(tmp_path):
    spec = load_study(write(tmp_path, BASE + """
        [[encodings]]
        kind = "sinusoidal"
        layout = ["interleaved", "concatenated"]
        spacing = ["vaswani", "tensor2tensor"]
        base = 100
    """))
    assert len(spec.encodings) == 4
    assert {(e.layout, e.spacing) for e in spec.encodings} == {
        ("interleaved", "vaswani"), ("interleaved", "tensor2tensor"),
        ("concatenated", "vaswani"), ("concatenated", "tensor2tensor")}
    assert all(e.base == 100.0 for e in spec.encodings)
    assert len(spec.runs()) == 4  # deterministic: once, not once per seed


@pytest.mark.parametrize("entry, pattern", [
    ('kind = "sinusodal"', r"s\.toml.*entry 1 \(kind = 'sinusodal'\).*installed kinds: (\w+, )*learned, (\w+, )*random, rotary, (\w+, )*sinusoidal"),
    ('kind = "sinusoidal"\nbse = 3', r"s\.toml.*entry 1.*unknown parameter\(s\) bse; valid parameters: base"),
    ('kind = "sinusoidal"\nbase = "big"', r"s\.toml.*entry 1.*: base must be a finite number, got 'big'"),
    ('kind = "sinusoidal"\nlayout = "diag"', r"entry 1.*one of 'interleaved', 'concatenated'"),
    ('kind = "learned"\nsource = "gpt2"\n', r"entry 1.*n_positions=2000.*1024"),
    ('kind = "learned"', r"entry 1 \(kind = 'learned'\): source is required \(a string\); write source = "),
    ('source = "gpt2"', r"must be a table with a kind"),
])
def test_bad_entries_fail_before_work_with_file_entry_and_choices(tmp_path, entry, pattern):
    text = BASE.replace("n_positions = 64", "n_positions = 2000") if "2000" in pattern else BASE
    path = write(tmp_path, text + "\n[[encodings]]\n" + entry + "\n")
    with pytest.raises(StudyError, match=pattern):
        load_study(path)


@pytest.mark.parametrize("entry, rest", [
    ('kind = "learned"\nsource = "gone.npy"', "source = 'gone.npy' looks like a file path, and there is no file or folder "),
    ('kind = "learned"\nsource = "gpt2"', "source = 'gpt2' is both the bundled table gpt2"),
    ('kind = "sinusoidal"\nn_positions = 65', "n_positions = 65 exceeds the study's n_positions = 64"),
    ('kind = "sinusoidal"\nn_positions = 1', "n_positions must be an integer >= 2, got 1"),
    ('kind = "random"', "random appears twice (also in entry 1)"),
    ('kind = "sinusoidal"\nlayout = ["interleaved", "interleaved"]', "sinusoidal appears twice (also in this entry)"),
    ('kind = "sinusoidal"\nbase = []', "base is an empty list"),
    ('kind = "sinusoidal"\nbase = "big"', "base must be a finite number, got 'big'"),
    ('kind = "sinusodal"', "unknown encoding kind 'sinusodal'"),
    ('kind = "random"\nstd = [1.0, 2.0, 3.0, 4.0]', "expands to 12 runs"),
    ('kind = ["random"]', "kind must be one name"),
])
def test_every_error_about_an_entry_names_it_the_same_way(tmp_path, entry, rest):
    """QA: a missing table file did not say which [[encodings]] entry named it; every per-entry message now begins
    FILE: [[encodings]] entry N (kind = 'K'): ..."""
    (tmp_path / "gpt2").mkdir()  # a bare bundled name that is also a folder beside the study: ambiguous
    path = write(tmp_path, BASE + '[[encodings]]\nkind = "random"\n[[encodings]]\n' + entry + "\n")
    kind = entry.split('"')[1] if not entry.startswith("kind = [") else None
    with pytest.raises(StudyError) as refused:
        load_study(path, max_runs=10)
    head = f"{path}: [[encodings]] entry 2" + (f" (kind = {kind!r})" if kind else "")
    assert str(refused.value).startswith(head) and str(refused.value)[len(head):].lstrip(": ").startswith(rest)


@pytest.mark.parametrize("change, pattern", [
    ("nme = 1", "unknown key"),
    ("max_distance = 64", r"max_distance must be an integer in \[1, 63\], got 64; it must be < n_positions = 64"),
    ("seeds = []", "seeds must be a non-empty list"),
    ('[analysis]\nmodels = ["cubic"]', r"\[analysis\]: models must be a non-empty list of distinct values, each one of 'exponential'.*got \['cubic'\]"),
    ("[analysis]\nthresholds = [2.0]", r"thresholds must be .* in \[-1, 1\]"),
    ("[analysis]\ncentre = true", "unknown \\[analysis\\] option"),
    ("[analysis]\nthresholds = [0.5, 0.5]", r"thresholds must be a non-empty list of distinct values, each a finite number in \[-1, 1\], got \[0.5, 0.5\]"),
])
def test_bad_top_level(tmp_path, change, pattern):
    base = BASE.replace("seeds = [0, 1, 2]", "") if change.startswith("seeds") else BASE
    path = write(tmp_path, base + change + '\n[[encodings]]\nkind = "random"\n')
    with pytest.raises(StudyError, match=pattern):
        load_study(path)


def test_invalid_toml_and_duplicates(tmp_path):
    with pytest.raises(StudyError, match="not valid TOML"):
        load_study(write(tmp_path, "name = \n"))
    with pytest.raises(StudyError, match=r"entry 2 \(kind = 'random'\): random appears twice \(also in entry 1\); remove"):
        load_study(write(tmp_path, BASE + '[[encodings]]\nkind = "random"\n[[encodings]]\nkind = "random"\n'))
    with pytest.raises(FileNotFoundError):
        load_study(tmp_path / "nope.toml")


def test_relative_source_resolves_against_study_folder(tmp_path, gpt2_table):
    import numpy as np

    (tmp_path / "tables").mkdir()
    np.save(tmp_path / "tables" / "mine.npy", gpt2_table[:100])
    spec = load_study(write(tmp_path, BASE + '[[encodings]]\nkind = "learned"\nsource = "tables/mine.npy"\n'))
    assert spec.encodings[0].generate(64, 16).shape == (64, 768)


def test_parse_study_from_dict():
    spec = parse_study({"name": "d", "n_positions": 10, "dim": 4, "encodings": [{"kind": "random"}]})
    assert spec.seeds == (0,) and spec.max_distance == 9


def test_relative_source_is_recorded_relative_to_the_working_folder(tmp_path, gpt2_table, monkeypatch):
    import numpy as np

    (tmp_path / "studies" / "tables").mkdir(parents=True)
    np.save(tmp_path / "studies" / "tables" / "mine.npy", gpt2_table[:100])
    path = write(tmp_path / "studies", BASE + '[[encodings]]\nkind = "learned"\nsource = "tables/mine.npy"\n')
    monkeypatch.chdir(tmp_path)
    spec = load_study(path)
    assert spec.encodings[0].label == "learned(source=studies/tables/mine.npy)"


@pytest.mark.parametrize("entry, key, value, why", [
    ({"kind": "rotary"}, "dim", 128, r"a common size these encodings accept; dim = 1 would be refused: .*odd"),
    ({"kind": "rotary", "rotary_dim": 64}, "dim", 64, r"the rotary_dim of \[\[encodings\]\] entry 1; dim = 1 would"),
    ({"kind": "sinusoidal"}, "dim", 128, r"a common size these encodings accept\)$"),
    ({"kind": "learned", "source": "trained-char-lm"}, "n_positions", 256, r"a common size these encodings accept"),
])
def test_a_missing_size_suggests_a_value_that_passes(entry, key, value, why):
    """QA report item 4: `write dim = 1` for a rotary study, which dim = 1 then refuses."""
    data = {"name": "s", "n_positions": 64, "dim": 64, "encodings": [entry]}
    del data[key]
    with pytest.raises(StudyError, match=rf"{key} is required \(.*\); write {key} = {value} \({why}"):
        parse_study(data)
    parse_study({**data, key: value})  # the value suggested passes
    bad = {**data, "encodings": [{"kind": "rotary", "rotary_dim": 3}]}
    # refused whatever the size: the entry's own fault is the message, the missing key a note after it
    with pytest.raises(StudyError, match=rf"entry 1 \(kind = 'rotary'\): rotary_dim must be an even integer.* "
                                         rf"\(and {key} is required: "):
        parse_study(bad)
