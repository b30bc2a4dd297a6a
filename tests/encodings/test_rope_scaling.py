"""RoPE scaling types (Hugging Face names) and RoPE parameters from a model's config.json."""

import json
import math

import numpy as np
import pytest

from poslab.encodings import make_encoding, rope_inv_freq
from poslab.encodings.base import ParameterError
from poslab.encodings.model_config import ModelConfigError, read_rope_config
from poslab.encodings.rope_scaling import (
    ROPE_TYPES,
    dynamic_rope_theta,
    rope_attention_factor,
    rope_parameters,
    yarn_correction_range,
)
from poslab.encodings.rotary import rope_decay_bound
from poslab.stages import run_stage

# Llama 3.1 8B (meta-llama/Llama-3.1-8B config.json): hidden_size 4096, 32 heads -> head_dim 128
LLAMA31 = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
    "num_key_value_heads": 8, "max_position_embeddings": 131072, "rope_theta": 500000.0,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
}
LLAMA31_INLINE = dict(rope_type="llama3", rope_theta=500000, rotary_dim=128, factor=8, low_freq_factor=1,
                      high_freq_factor=4, original_max_position_embeddings=8192)


def _summary(enc, n_positions, dim=128):
    """The rope_geometry stage's summary columns of a run (a study of width ``dim``)."""
    return run_stage("rope_geometry", enc, n_positions, dim).summary


def _tables(enc, n_positions, dim):
    """The rope_geometry stage's tables of a run."""
    return run_stage("rope_geometry", enc, n_positions, dim).tables


def core_info(info):
    """The rope_geometry summary without the provenance columns (rope_defaults, rope_rules), tested on their own."""
    return {k: v for k, v in info.items() if k not in ("rope_defaults", "rope_rules")}


def write_config(folder, cfg, name="config.json"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(cfg))
    return folder / name


def llama31_reference(inv_freq, factor=8.0, low=1.0, high=4.0, old_context_len=8192):
    """Element by element, as Meta's llama-models ``apply_scaling`` (Llama 3.1 reference code)."""
    out = []
    for freq in inv_freq:
        wavelen = 2 * math.pi / freq
        if wavelen < old_context_len / high:
            out.append(freq)
        elif wavelen > old_context_len / low:
            out.append(freq / factor)
        else:
            smooth = (old_context_len / wavelen - low) / (high - low)
            out.append((1 - smooth) * freq / factor + smooth * freq)
    return np.array(out)


# ------------------------------------------------------------------ llama3
def test_c7_llama3_split_and_last_frequency():
    inv_freq, attention = rope_parameters("llama3", rotary_dim=128, rope_theta=500000.0, factor=8.0,
                                          low_freq_factor=1.0, high_freq_factor=4.0,
                                          original_max_position_embeddings=8192)
    reference = rope_inv_freq(128, 500000.0)
    ratio = reference / inv_freq
    unchanged = np.flatnonzero(np.isclose(ratio, 1.0, rtol=1e-12))
    divided = np.flatnonzero(np.isclose(ratio, 8.0, rtol=1e-12))
    smoothed = np.setdiff1d(np.arange(64), np.union1d(unchanged, divided))
    assert len(unchanged) == 29 and len(divided) == 29
    np.testing.assert_array_equal(smoothed, [29, 30, 31, 32, 33, 34])
    assert np.all((ratio[smoothed] > 1) & (ratio[smoothed] < 8))
    assert reference[63] == pytest.approx(2.455141e-06, rel=2e-7)
    assert inv_freq[63] == pytest.approx(3.068926e-07, rel=2e-7)
    assert attention == 1.0
    np.testing.assert_allclose(inv_freq, llama31_reference(reference), rtol=1e-15)


def test_llama3_head_dim_64_factor_32_splits_15_3_14():
    """rope_theta 500000, low_freq_factor 1, high_freq_factor 4, original 8192 (Llama 3.1/3.2 values)."""
    reference = rope_inv_freq(64, 500000.0)
    for factor in (32.0, 8.0):  # the split depends on the wavelengths only, not on factor
        inv_freq, _ = rope_parameters("llama3", rotary_dim=64, rope_theta=500000.0, factor=factor,
                                      low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=8192)
        ratio = reference / inv_freq
        assert np.isclose(ratio, 1.0).sum() == 15 and np.isclose(ratio, factor).sum() == 14
        np.testing.assert_array_equal(np.flatnonzero(~np.isclose(ratio, 1.0) & ~np.isclose(ratio, factor)), [15, 16, 17])
        np.testing.assert_allclose(inv_freq, llama31_reference(reference, factor=factor), rtol=1e-15)


# ------------------------------------------------------------------ yarn
def test_yarn_correction_range_and_ramp():
    assert yarn_correction_range(128, 1e4, 4096) == (20, 46)  # beta_fast 32, beta_slow 1, truncate
    low, high = yarn_correction_range(128, 1e4, 4096, truncate=False)
    # i(r) = d ln(L / (2 pi r)) / (2 ln base)
    assert low == pytest.approx(128 * math.log(4096 / (64 * math.pi)) / (2 * math.log(1e4)))
    assert (low, high) == pytest.approx((20.944482, 45.026881), abs=1e-6)
    inv_freq, attention = rope_parameters("yarn", rotary_dim=128, rope_theta=1e4, factor=4.0,
                                          original_max_position_embeddings=4096)
    reference = rope_inv_freq(128, 1e4)
    np.testing.assert_array_equal(inv_freq[:21], reference[:21])          # pairs 0..20 extrapolate
    np.testing.assert_allclose(inv_freq[46:], reference[46:] / 4, rtol=1e-15)  # pairs 46..63 interpolate
    ramp = (np.arange(21, 46) - 20) / 26
    np.testing.assert_allclose(inv_freq[21:46], reference[21:46] * (1 - ramp) + reference[21:46] / 4 * ramp, rtol=1e-15)
    assert attention == pytest.approx(0.1 * math.log(4) + 1)  # 1.138629
    untruncated, _ = rope_parameters("yarn", rotary_dim=128, rope_theta=1e4, factor=4.0,
                                     original_max_position_embeddings=4096, truncate=False)
    ramp = np.clip((np.arange(64) - low) / (high - low), 0, 1)
    np.testing.assert_allclose(untruncated, reference * (1 - ramp) + reference / 4 * ramp, rtol=1e-15)


def test_yarn_attention_factor_rules():
    base = dict(factor=40.0, original_max_position_embeddings=4096)
    assert rope_attention_factor("yarn", **base) == pytest.approx(0.1 * math.log(40) + 1)
    # DeepSeek-V2-Lite: mscale = mscale_all_dim = 0.707 -> ratio 1
    assert rope_attention_factor("yarn", **base, mscale=0.707, mscale_all_dim=0.707) == pytest.approx(1.0)
    assert rope_attention_factor("yarn", **base, mscale=1.0, mscale_all_dim=0.5) == pytest.approx(
        (0.1 * math.log(40) + 1) / (0.05 * math.log(40) + 1))
    assert rope_attention_factor("yarn", **base, mscale=1.0) == pytest.approx(0.1 * math.log(40) + 1)  # one alone: plain rule
    assert rope_attention_factor("yarn", **base, mscale=1.0, mscale_all_dim=1.0, attention_factor=0.5) == 0.5
    # factor from max / original length when only those are given (transformers' fallback)
    assert rope_attention_factor("yarn", max_position_embeddings=16384, original_max_position_embeddings=4096) == \
        pytest.approx(0.1 * math.log(4) + 1)


# ------------------------------------------------------------------ dynamic, linear, longrope
def test_dynamic_base_grows_only_beyond_max_position_embeddings():
    for length in (1, 1000, 2048):
        assert dynamic_rope_theta(1e4, 128, 2.0, 2048, length) == 1e4
    assert dynamic_rope_theta(1e4, 128, 2.0, 2048, 4096) == pytest.approx(30527.74, abs=5e-3)
    assert dynamic_rope_theta(1e4, 128, 2.0, 2048, 4096) == pytest.approx(1e4 * 3 ** (128 / 126), rel=1e-15)
    params = dict(rotary_dim=128, rope_theta=1e4, factor=2.0, max_position_embeddings=2048)
    np.testing.assert_array_equal(rope_parameters("dynamic", **params, seq_len=2048)[0], rope_inv_freq(128, 1e4))
    np.testing.assert_allclose(rope_parameters("dynamic", **params, seq_len=4096)[0],
                               rope_inv_freq(128, 1e4 * 3 ** (128 / 126)), rtol=1e-15)
    enc = make_encoding("rotary", rope_type="dynamic", rotary_dim=128, factor=2, max_position_embeddings=2048)
    assert core_info(_summary(enc, 4096)) == {"effective_rope_type": "dynamic", "attention_scaling": 1.0,
                                             "rope_length": 4096}
    freqs = _tables(enc, 4096, 128)["inv_freq"]
    assert freqs["effective_rope_theta"].iloc[0] == pytest.approx(30527.7367, abs=1e-4)


def test_linear_is_default_over_factor():
    inv_freq, attention = rope_parameters("linear", rotary_dim=64, rope_theta=1e4, factor=4.0)
    np.testing.assert_array_equal(inv_freq, rope_inv_freq(64, 1e4) / 4.0)
    assert attention == 1.0
    np.testing.assert_array_equal(rope_parameters("default", rotary_dim=64, rope_theta=1e4)[0], rope_inv_freq(64, 1e4))


def test_longrope_short_or_long_by_analysed_length(tmp_path):
    # Phi-3-mini-128k layout: original_max_position_embeddings at the top level, factor = 131072 / 4096 = 32
    short, long = [1.0 + 0.01 * i for i in range(48)], [1.0 + 0.5 * i for i in range(48)]
    cfg = {"hidden_size": 3072, "num_attention_heads": 32, "max_position_embeddings": 131072,
           "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
           "rope_scaling": {"type": "longrope", "short_factor": short, "long_factor": long}}
    path = write_config(tmp_path / "phi3", cfg)
    enc = make_encoding("rotary", config=str(path))
    reference = rope_inv_freq(96, 1e4)
    np.testing.assert_allclose(enc.inv_freq(3072, 4096), reference / np.array(short), rtol=1e-15)
    np.testing.assert_allclose(enc.inv_freq(3072, 4097), reference / np.array(long), rtol=1e-15)
    attention = math.sqrt(1 + math.log(32) / math.log(4096))
    assert attention == pytest.approx(1.190238, abs=1e-6)
    assert core_info(_summary(enc, 4097)) == {"effective_rope_type": "longrope",
                                             "attention_scaling": pytest.approx(attention), "rope_length": 4097,
                                             "rope_factors": "long"}
    assert _summary(enc, 100)["rope_factors"] == "short"
    table = enc.generate(8, 3072)
    assert table.shape == (8, 96)
    np.testing.assert_allclose(np.linalg.norm(table, axis=1), attention * np.sqrt(48), rtol=1e-12)
    cfg["rope_scaling"]["attention_factor"] = 1.0  # explicit wins
    assert _summary(make_encoding("rotary", config=str(write_config(tmp_path / "x", cfg))), 10)["attention_scaling"] == 1.0
    cfg["rope_scaling"]["short_factor"] = short[:10]
    bad = make_encoding("rotary", config=str(write_config(tmp_path / "bad", cfg)))
    with pytest.raises(ValueError, match="short_factor has 10 values, expected rotary_dim / 2 = 48"):
        bad.generate(8, 3072)


# ------------------------------------------------------------------ config.json
def test_config_equals_inline(tmp_path):
    path = write_config(tmp_path / "Llama-3.1-8B", LLAMA31)
    from_file = make_encoding("rotary", config=str(path))
    from_folder = make_encoding("rotary", config=str(path.parent))
    inline = make_encoding("rotary", **LLAMA31_INLINE)
    expected = inline.generate(300, 128)
    for enc in (from_file, from_folder):
        np.testing.assert_array_equal(enc.generate(300, 768), expected)  # the study dim does not matter
        np.testing.assert_array_equal(enc.inv_freq(768), inline.inv_freq(128))
        assert _summary(enc, 300) == _summary(inline, 300)
    assert from_file.label == f"rotary(config={path})"
    assert inline.label == ("rotary(factor=8, high_freq_factor=4, low_freq_factor=1, original_max_position_embeddings=8192, "
                            "rope_theta=500000, rope_type=llama3, rotary_dim=128)")
    # inline values override the config's, key by key
    np.testing.assert_array_equal(make_encoding("rotary", config=str(path), factor=4).inv_freq(768),
                                  make_encoding("rotary", **{**LLAMA31_INLINE, "factor": 4}).inv_freq(128))
    as_yarn = make_encoding("rotary", config=str(path), rope_type="yarn")  # factor 8 and original 8192 from the config
    np.testing.assert_array_equal(as_yarn.inv_freq(768), rope_parameters(
        "yarn", rotary_dim=128, rope_theta=5e5, factor=8.0, original_max_position_embeddings=8192)[0])
    np.testing.assert_array_equal(make_encoding("rotary", config=str(path), rope_type="default").inv_freq(1),
                                  rope_inv_freq(128, 5e5))


@pytest.mark.parametrize("key", ["rope_scaling", "rope_parameters"])
@pytest.mark.parametrize("type_key", ["type", "rope_type"])
def test_rope_parameters_or_rope_scaling_type_or_rope_type(tmp_path, key, type_key):
    scaling = {k: v for k, v in LLAMA31["rope_scaling"].items() if k != "rope_type"}
    cfg = {k: v for k, v in LLAMA31.items() if k != "rope_scaling"}
    cfg[key] = {**scaling, type_key: "llama3"}
    if key == "rope_parameters":  # transformers 5 moves rope_theta inside
        cfg["rope_parameters"]["rope_theta"] = cfg.pop("rope_theta")
    enc = make_encoding("rotary", config=str(write_config(tmp_path, cfg)))
    np.testing.assert_array_equal(enc.inv_freq(1), make_encoding("rotary", **LLAMA31_INLINE).inv_freq(128))


def test_head_width_and_partial_rotary_factor(tmp_path):
    # Phi-2: hidden_size 2560, 32 heads (head 80), partial_rotary_factor 0.4 -> 32 rotated dims
    phi2 = {"hidden_size": 2560, "num_attention_heads": 32, "partial_rotary_factor": 0.4, "rope_theta": 10000.0}
    enc = make_encoding("rotary", config=str(write_config(tmp_path / "phi2", phi2)))
    assert read_rope_config(tmp_path / "phi2").partial_rotary_factor == 0.4
    assert enc.generate(5, 2560).shape == (5, 32)
    np.testing.assert_array_equal(enc.inv_freq(2560), rope_inv_freq(32, 1e4))  # exponent over rotary_dim, as HF
    np.testing.assert_array_equal(make_encoding("rotary", config=str(tmp_path / "phi2"), partial_rotary_factor=0.5)
                                  .inv_freq(1), rope_inv_freq(40, 1e4))
    # inline: partial_rotary_factor of the study dim equals the same rotary_dim
    np.testing.assert_array_equal(make_encoding("rotary", partial_rotary_factor=0.4).generate(7, 80),
                                  make_encoding("rotary", rotary_dim=32).generate(7, 80))
    # GPT-NeoX / Pythia names; explicit head_dim wins over hidden_size / heads; DeepSeek's qk_rope_head_dim
    neox = {"hidden_size": 512, "num_attention_heads": 8, "rotary_pct": 0.25, "rotary_emb_base": 10000}
    assert make_encoding("rotary", config=str(write_config(tmp_path / "neox", neox))).resolve(1).rotary_dim == 16
    gemma = {"hidden_size": 2304, "num_attention_heads": 8, "head_dim": 256, "rope_theta": 10000.0}
    assert make_encoding("rotary", config=str(write_config(tmp_path / "gemma", gemma))).resolve(1).rotary_dim == 256
    deepseek = {"hidden_size": 7168, "num_attention_heads": 128, "qk_rope_head_dim": 64, "max_position_embeddings": 163840,
                "rope_theta": 10000, "rope_scaling": {"type": "yarn", "factor": 40, "beta_fast": 32, "beta_slow": 1,
                                                      "mscale": 1.0, "mscale_all_dim": 1.0,
                                                      "original_max_position_embeddings": 4096}}
    ds = make_encoding("rotary", config=str(write_config(tmp_path / "ds", deepseek)))
    assert ds.generate(3, 7168).shape == (3, 64) and _summary(ds, 3)["attention_scaling"] == 1.0
    # a multimodal config with the language model under text_config
    llava = {"model_type": "llava", "text_config": LLAMA31}
    assert read_rope_config(write_config(tmp_path / "llava", llava)).rope_type == "llama3"


def test_config_errors(tmp_path):
    with pytest.raises(ParameterError, match=r"rotary: config: .*nope\.json' looks like a file path, and there is no file or folder .*nope\.json"):
        make_encoding("rotary", config=str(tmp_path / "nope.json"))
    with pytest.raises(ParameterError, match=r"\(model folder\) has no config.json"):
        make_encoding("rotary", config=str(tmp_path))
    (tmp_path / "bad.json").write_text('{"rope_theta": 10000,')
    with pytest.raises(ParameterError, match=r"bad\.json: not valid JSON"):
        make_encoding("rotary", config=str(tmp_path / "bad.json"))
    cases = [
        ({"rope_scaling": {"type": "ntk-by-parts", "factor": 2}},
         "unknown rope type 'ntk-by-parts'; valid: default, linear, dynamic, yarn, longrope, llama3"),
        ({"rope_scaling": {"type": "su", "short_factor": [1], "long_factor": [1]}}, "'su' is the old name of 'longrope'"),
        ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}},
         r"rope_type 'llama3' needs low_freq_factor, high_freq_factor \(config .* with the inline values\)"),
        ({"rope_scaling": {"rope_type": "linear"}}, "rope_type 'linear' needs factor"),
        ({"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, "rope_type 'dynamic' needs max_position_embeddings"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 2.0}},
         r"needs original_max_position_embeddings \(or max_position_embeddings\)"),
        ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}, "rope_parameters": {"rope_type": "linear", "factor": 4.0}},
         "both rope_scaling and rope_parameters, and they differ"),
        ({"rope_parameters": {"full_attention": {"rope_type": "default"}, "sliding_attention": {"rope_type": "default"}}},
         r"rope_parameters is given per layer type \(full_attention, sliding_attention\) but the config has no "
         "layer_types"),
        ({"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                              "sliding_attention": {"rope_type": "default"}},
          "layer_types": ["sliding_attention", "full_attention"], "head_dim": 8},
         r"a different RoPE per layer type: sliding_attention \(1 layer: rope_type default, rope_theta 10000, "
         r"head_dim 8\); full_attention \(1 layer: rope_type default, rope_theta 1000000.*"
         r"layer_type = \"sliding_attention\""),
        ({"rope_scaling": {"rope_type": "linear", "factor": "8"}}, "rope_scaling.factor must be a finite number > 0, got '8'"),
        ({"rope_scaling": {"rope_type": "linear", "factor": 0}}, "rope_scaling.factor must be a finite number > 0, got 0"),
        ({"rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 4, "high_freq_factor": 1,
                           "original_max_position_embeddings": 8192}}, "high_freq_factor must be >= low_freq_factor"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 4096, "beta_fast": 1,
                           "beta_slow": 32}}, "beta_fast must be >= beta_slow"),
        ({"rope_scaling": {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 4096.5}},
         "rope_scaling.original_max_position_embeddings must be an integer >= 1, got 4096.5"),
        ({"rope_scaling": {"rope_type": "longrope", "short_factor": [1.0], "long_factor": [1.0],
                           "original_max_position_embeddings": 4096}},
         r"needs factor \(or max_position_embeddings\) for its attention factor, or an explicit attention_factor"),
        ({"rope_theta": "big"}, "rope_theta must be a finite number > 1, got 'big'"),
        ({"hidden_size": 64.5, "num_attention_heads": 2}, "hidden_size must be an integer >= 1, got 64.5"),
        ([1, 2], "expected a JSON object, got list"),
    ]
    for i, (cfg, pattern) in enumerate(cases):
        path = write_config(tmp_path / f"case{i}", cfg)
        with pytest.raises(ParameterError, match=pattern):
            make_encoding("rotary", config=str(path))


def test_inline_errors():
    with pytest.raises(ParameterError, match="rope_type 'linear' does not use beta_fast; it uses: factor"):
        make_encoding("rotary", rope_type="linear", factor=2, beta_fast=32)
    with pytest.raises(ParameterError, match="rope_type 'default' does not use factor; it uses: no scaling parameters"):
        make_encoding("rotary", factor=2)
    with pytest.raises(ParameterError, match="rope_type 'llama3' needs factor, low_freq_factor"):
        make_encoding("rotary", rope_type="llama3", high_freq_factor=4, original_max_position_embeddings=8192)
    with pytest.raises(ParameterError, match="needs short_factor, long_factor; .* from a model's config.json only"):
        make_encoding("rotary", rope_type="longrope", factor=2, original_max_position_embeddings=4096)
    with pytest.raises(ParameterError, match="give rotary_dim or partial_rotary_factor, not both"):
        make_encoding("rotary", rotary_dim=64, partial_rotary_factor=0.5)
    with pytest.raises(ParameterError, match=r"rope_type.*one of 'default', 'linear', 'dynamic', 'yarn', 'longrope', 'llama3'"):
        make_encoding("rotary", rope_type="ntk")
    with pytest.raises(ParameterError, match=r"partial_rotary_factor must be a finite number in \(0, 1\], or omitted \(None\), got 1.5"):
        make_encoding("rotary", partial_rotary_factor=1.5)
    with pytest.raises(ParameterError, match="truncate"):
        make_encoding("rotary", rope_type="yarn", factor=2, original_max_position_embeddings=64, truncate=1)
    with pytest.raises(ValueError, match="rotary_dim comes out as 25"):
        make_encoding("rotary", partial_rotary_factor=0.25).generate(4, 100)
    with pytest.raises(ValueError, match="unknown rope_type 'su'.*old name of 'longrope'"):
        rope_parameters("su", rotary_dim=8)
    assert set(ROPE_TYPES) == {"default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional"}


def test_study_file_with_a_config_beside_it(tmp_path):
    from poslab.study import StudyError, load_study, run_study

    write_config(tmp_path / "models" / "llama", LLAMA31)
    study = tmp_path / "s.toml"
    study.write_text('name = "r"\nn_positions = 64\ndim = 16\n[analysis]\nheatmap_bins = 8\nmodels = ["exponential"]\n'
                     '[[encodings]]\nkind = "rotary"\nconfig = "models/llama"\nrope_type = ["llama3", "yarn"]\n')
    spec = load_study(study)
    assert [e.resolved_rope_type for e in spec.encodings] == ["llama3", "yarn"]
    result = run_study(spec, progress=False)
    # analysed from the exact kernel: no table generated, table_dim empty (the width is in inv_freq.csv: 64 pairs)
    assert (result.summary["status"] == "ok").all() and result.summary["table_dim"].isna().all()
    assert list(result.summary["effective_rope_type"]) == ["llama3", "yarn"]
    assert list(result.summary["attention_scaling"]) == pytest.approx([1.0, 0.1 * math.log(8) + 1])
    freqs = result.frames["inv_freq"]
    assert len(freqs) == 2 * 64 and freqs["label"].nunique() == 2
    decay = result.frames["rope_decay"]
    assert len(decay) == 2 * 64 and (decay.groupby("label")["relative_upper_bound"].first() == 32.5).all()
    study.write_text('name = "r"\nn_positions = 64\ndim = 16\n[[encodings]]\nkind = "rotary"\nconfig = "missing"\n')
    with pytest.raises(StudyError, match=r"entry 1 \(kind = 'rotary'\): config: 'missing' is neither an existing file"):
        load_study(study)


# ------------------------------------------------------------------ RoFormer's decay bound
def test_rope_decay_bound_brute_force_and_closed_form_at_zero():
    inv_freq = rope_inv_freq(16, 1e4)
    distance = np.array([0, 1, 5, 37, 1000, 123456])
    brute = [np.mean([abs(sum(np.exp(1j * k * inv_freq[l]) for l in range(j))) for j in range(1, 9)]) for k in distance]
    np.testing.assert_allclose(rope_decay_bound(inv_freq, distance, chunk=4), brute, rtol=1e-12)
    assert rope_decay_bound(rope_inv_freq(128, 1e4), [0])[0] == (64 + 1) / 2
    # it decays (RoFormer figure 2): 32.5 at 0, 8.93 on average over distances 100..199
    bound = rope_decay_bound(rope_inv_freq(128, 1e4), np.arange(200))
    assert np.all(bound[1:] < bound[0]) and bound[100:].mean() == pytest.approx(8.925250, abs=1e-6)


def test_rope_decay_rows_every_distance_then_log_spaced_equal_the_definition():
    from poslab.encodings.rotary import Rotary
    from poslab.stages import run_stage
    from poslab.stages.rope import BOUND_DENSE

    short = run_stage("rope_geometry", Rotary(), 2 * BOUND_DENSE, 64).tables["rope_decay"]
    assert list(short["distance"]) == list(range(2 * BOUND_DENSE))  # up to 8192 positions: every distance
    n = 300_000
    decay = run_stage("rope_geometry", Rotary(), n, 64).tables["rope_decay"]
    d = decay["distance"].to_numpy()
    assert np.array_equal(d[:BOUND_DENSE], np.arange(BOUND_DENSE)) and d[-1] == n - 1
    assert len(d) <= 2 * BOUND_DENSE and np.all(np.diff(d) > 0)
    ratio = d[BOUND_DENSE + 1:] / d[BOUND_DENSE:-1]
    assert ratio.max() < 1.01  # geometric spacing: (n / 4096)^(1/4096) ~ 1.001, rounded to integers
    inv_freq = rope_inv_freq(64, 1e4)
    for row in decay.iloc[[0, 5, BOUND_DENSE + 7, len(decay) - 1]].itertuples():
        k = row.distance  # the brute-force definition, (1 / (d/2)) Σ_j |Σ_{l<j} e^{i k θ_l}|
        brute = np.mean([abs(sum(np.exp(1j * k * inv_freq[l]) for l in range(j))) for j in range(1, 33)])
        assert row.relative_upper_bound == pytest.approx(brute, rel=1e-12)


def test_figure_from_tables(tmp_path):
    from poslab.plots import STUDY_FIGURES
    from poslab.study import load_study, run_study

    study = tmp_path / "s.toml"
    study.write_text('name = "r"\nn_positions = 40\ndim = 32\n[analysis]\nheatmap_bins = 8\nmodels = ["exponential"]\n'
                     '[[encodings]]\nkind = "rotary"\nrope_type = "linear"\nfactor = [1, 4]\n'
                     '[[encodings]]\nkind = "sinusoidal"\n')
    tables = run_study(load_study(study), progress=False).frames
    fig = STUDY_FIGURES["rope_geometry.png"](tables, "t")
    assert fig is not None and len(fig.axes) == 3
    assert [len(ax.lines) for ax in fig.axes] == [2, 2, 2]
    assert STUDY_FIGURES["rope_geometry.png"]({k: v for k, v in tables.items() if k not in ("inv_freq", "rope_decay")},
                                              "t") is None


# ------------------------------------------------------------------ issue 10 findings (closed forms)
def test_hunyuan_dynamic_with_alpha_is_static_ntk_alpha(tmp_path):
    """{"type": "dynamic", "alpha": 1000, "factor": 1}: base·alpha^(d/(d−2)) at every length, factor unused."""
    cfg = {"model_type": "hunyuan_v1_dense", "hidden_size": 1024, "num_attention_heads": 8, "head_dim": 128,
           "max_position_embeddings": 32768, "rope_theta": 10000.0,
           "rope_scaling": {"type": "dynamic", "alpha": 1000.0, "factor": 1.0}}
    enc = make_encoding("rotary", config=str(write_config(tmp_path / "hy", cfg)))
    base = 1e4 * 1000.0 ** (128 / 126)
    for n in (16, 40000):  # no growth with the length: a static base
        r = enc.resolve(1, n)
        np.testing.assert_allclose(r.inv_freq, rope_inv_freq(128, base), rtol=1e-15)
        assert r.effective_rope_theta == pytest.approx(base, rel=1e-15)
    assert "NTK-alpha" in _summary(enc, 16)["rope_rules"]
    np.testing.assert_allclose(rope_parameters("dynamic", rotary_dim=128, rope_theta=1e4, alpha=1000.0)[0],
                               rope_inv_freq(128, base), rtol=1e-15)
    # the same key on an architecture whose transformers model ignores it is refused, not applied
    cfg["model_type"] = "llama"
    with pytest.raises(ParameterError, match="alpha .*read only by Hunyuan.*transformers' llama ignores it"):
        make_encoding("rotary", config=str(write_config(tmp_path / "llama", cfg)))


def test_llama3_low_equal_high_is_a_hard_cut():
    """Llama 4 Scout: factor 16, low = high = 1, original 8192: no smoothing band."""
    inv_freq, _ = rope_parameters("llama3", rotary_dim=128, rope_theta=5e5, factor=16.0, low_freq_factor=1.0,
                                  high_freq_factor=1.0, original_max_position_embeddings=8192)
    reference = rope_inv_freq(128, 5e5)
    long = 2 * np.pi / reference > 8192
    np.testing.assert_array_equal(inv_freq, np.where(long, reference / 16, reference))
    assert 0 < long.sum() < 64
    assert np.all(np.isfinite(inv_freq))


def test_phimoe_short_and_long_mscale(tmp_path):
    """Phi-3.5-MoE: attention scaling short_mscale up to the original length, long_mscale beyond (1.243163)."""
    short, long = [1.0] * 64, [1.5] * 64
    cfg = {"model_type": "phimoe", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
           "rope_theta": 10000.0, "rope_scaling": {
               "type": "longrope", "short_factor": short, "long_factor": long, "original_max_position_embeddings": 4096,
               "short_mscale": 1.243163121016122, "long_mscale": 1.243163121016122}}
    enc = make_encoding("rotary", config=str(write_config(tmp_path / "phimoe", cfg)))
    assert enc.resolve(1, 100).attention_scaling == pytest.approx(1.243163121016122)
    assert _summary(enc, 5000)["attention_scaling"] == pytest.approx(1.243163121016122)  # not 1.19024
    assert rope_attention_factor("longrope", seq_len=10, short_factor=short, long_factor=long,
                                 original_max_position_embeddings=4096, short_mscale=1.1, long_mscale=1.3) == 1.1
    assert rope_attention_factor("longrope", seq_len=4097, short_factor=short, long_factor=long,
                                 original_max_position_embeddings=4096, short_mscale=1.1, long_mscale=1.3) == 1.3
    cfg["model_type"] = "phi3"  # transformers' Phi-3 ignores these keys: refused, not guessed
    with pytest.raises(ParameterError, match="short_mscale is read only by PhiMoE"):
        make_encoding("rotary", config=str(write_config(tmp_path / "phi3", cfg)))


def test_proportional_rope_type():
    """Gemma 4 full-attention layers: 25 % of the pairs rotate, exponent over the full head, the rest frequency 0."""
    inv_freq, attention = rope_parameters("proportional", rotary_dim=512, rope_theta=1e6, partial_rotary_factor=0.25)
    assert inv_freq.shape == (256,) and attention == 1.0
    assert np.count_nonzero(inv_freq) == 64
    np.testing.assert_allclose(inv_freq[:64], 1e6 ** (-np.arange(0, 128, 2) / 512), rtol=1e-15)
    np.testing.assert_allclose(rope_parameters("proportional", rotary_dim=8, rope_theta=1e4, factor=2.0)[0],
                               rope_inv_freq(8, 1e4) / 2, rtol=1e-15)
    enc = make_encoding("rotary", rope_type="proportional", rope_theta=1e6, partial_rotary_factor=0.25)
    table = enc.generate(10, 512)
    assert table.shape == (10, 512)
    np.testing.assert_array_equal(table[:, 128::2], 1.0)  # un-rotated pairs: cos 0 = 1, sin 0 = 0 (interleaved)
    freqs = _tables(enc, 10, table.shape[1])["inv_freq"]
    assert np.isinf(freqs["wavelength"].iloc[-1]) and freqs["wavelength"].iloc[0] == pytest.approx(2 * np.pi)


@pytest.mark.parametrize("rotary_dim", [2])
def test_dynamic_single_pair_is_a_clear_error(rotary_dim):
    with pytest.raises(ValueError, match="dynamic NTK scaling .* undefined for rotary_dim = 2"):
        rope_parameters("dynamic", rotary_dim=rotary_dim, factor=2.0, max_position_embeddings=16, seq_len=32)
    with pytest.raises(ValueError, match="rotary: dynamic NTK scaling .* needs rotary_dim >= 4"):
        make_encoding("rotary", rope_type="dynamic", rotary_dim=2, factor=2, max_position_embeddings=16).generate(32, 8)


@pytest.mark.parametrize("sizes, pattern", [
    ({"hidden_size": 64, "num_attention_heads": 0}, "num_attention_heads must be an integer >= 1, got 0"),
    ({"hidden_size": 0, "num_attention_heads": 4}, "hidden_size must be an integer >= 1, got 0"),
    ({"hidden_size": 2, "num_attention_heads": 4}, r"hidden_size // num_attention_heads = 2 // 4 = 0"),
    ({"head_dim": -8}, "head_dim must be an integer >= 1, got -8"),
    ({"head_dim": 8, "max_position_embeddings": 0, "rope_scaling": {"type": "dynamic", "factor": 2.0}},
     "max_position_embeddings must be an integer >= 1, got 0"),
    ({"head_dim": 8, "partial_rotary_factor": 0}, r"partial_rotary_factor must be a finite number in \(0, 1\], got 0"),
    ({"head_dim": 8, "rope_theta": 1.0}, "rope_theta must be a finite number > 1, got 1.0"),
])
def test_degenerate_sizes_are_clear_errors(tmp_path, sizes, pattern):
    """Issue 11 item 6: num_attention_heads = 0 (ZeroDivisionError before) and every other degenerate size."""
    with pytest.raises(ParameterError, match=pattern):
        make_encoding("rotary", config=str(write_config(tmp_path, {"model_type": "llama", **sizes})))


def test_head_width_from_the_architectures_keys(tmp_path):
    cases = [  # (config, rotary_dim, rope_theta)
        ({"model_type": "jetmoe", "hidden_size": 2048, "num_attention_heads": 32, "kv_channels": 128}, 128, 1e4),
        ({"model_type": "zamba2", "hidden_size": 2560, "num_attention_heads": 32}, 160, 1e4),  # 2·hidden / heads
        ({"model_type": "dbrx", "d_model": 6144, "n_heads": 48, "attn_config": {"rope_theta": 500000, "kv_n_heads": 8}},
         128, 5e5),
        ({"model_type": "moonshine", "hidden_size": 288, "decoder_num_attention_heads": 8,
          "encoder_num_attention_heads": 8}, 32, 1e4),  # head 36 x partial_rotary_factor 0.9 = 32
        ({"model_type": "moonshine", "hidden_size": 288, "decoder_num_attention_heads": 4,
          "encoder_num_attention_heads": 8}, 64, 1e4),  # the decoder's head 72 x 0.9 = 64, for both
    ]
    for i, (cfg, rotary_dim, theta) in enumerate(cases):
        r = make_encoding("rotary", config=str(write_config(tmp_path / str(i), cfg))).resolve(4096, 16)
        assert (r.rotary_dim, r.rope_theta) == (rotary_dim, theta), cfg["model_type"]


def test_left_out_keys_mean_the_architectures_defaults(tmp_path):
    cases = {"gpt_neox": ("partial_rotary_factor", "0.25", 16), "phi": ("partial_rotary_factor", "0.5", 32),
             "stablelm": ("partial_rotary_factor", "0.25", 16), "persimmon": ("partial_rotary_factor", "0.5", 32),
             "cohere": ("rope_theta", "500000", 64), "bitnet": ("rope_theta", "500000", 64),
             "smollm3": ("rope_theta", "2000000", 64)}
    for model_type, (key, value, rotary_dim) in cases.items():
        cfg = {"model_type": model_type, "hidden_size": 512, "num_attention_heads": 8}
        enc = make_encoding("rotary", config=str(write_config(tmp_path / model_type, cfg)))
        r = enc.resolve(4096, 16)
        assert r.rotary_dim == rotary_dim, model_type
        assert r.sources[key] == f"architecture default ({model_type})"
        assert f"{key}={value} (architecture default ({model_type}))" in _summary(enc, 16)["rope_defaults"]


def test_no_rope_configs_are_refused_naming_their_scheme(tmp_path):
    cases = [
        ({"model_type": "gpt2", "n_embd": 768, "n_head": 12}, "gpt2' uses a learned absolute position table"),
        ({"model_type": "bert", "hidden_size": 768, "num_attention_heads": 12, "position_embedding_type": "absolute"},
         "learned absolute position table"),
        ({"model_type": "bloom", "hidden_size": 64, "n_head": 8}, "ALiBi"),
        ({"model_type": "falcon", "hidden_size": 64, "num_attention_heads": 8, "alibi": True}, "ALiBi"),
        ({"model_type": "t5", "d_model": 512, "num_heads": 8}, "T5 relative position buckets"),
        ({"model_type": "mistral-like-but-unknown", "position_embedding_type": "relative_key"},
         "learned relative distance embeddings"),
    ]
    for i, (cfg, pattern) in enumerate(cases):
        with pytest.raises(ParameterError, match=pattern):
            make_encoding("rotary", config=str(write_config(tmp_path / str(i), cfg)))
    falcon = {"model_type": "falcon", "hidden_size": 64, "num_attention_heads": 8, "alibi": False}
    assert make_encoding("rotary", config=str(write_config(tmp_path / "f", falcon))).resolve(1).rotary_dim == 8


def test_legacy_qwen2_vl_mrope_config_is_read_for_text_tokens(tmp_path):
    """The published Qwen2-VL config: flat, rope_scaling {"type": "mrope", "mrope_section": [16, 24, 24]}."""
    cfg = {"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28, "rope_theta": 1000000.0,
           "max_position_embeddings": 32768, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
           "vision_config": {"depth": 32, "embed_dim": 1280}}
    enc = make_encoding("rotary", config=str(write_config(tmp_path / "qwen2vl", cfg)))
    r = enc.resolve(1, 64)
    assert (r.rope_type, r.rotary_dim, r.rope_theta) == ("default", 128, 1e6)
    np.testing.assert_array_equal(r.inv_freq, rope_inv_freq(128, 1e6))
    assert "M-RoPE (chunked, mrope_section [16, 24, 24]): analysed for text tokens" in _summary(enc, 64)["rope_rules"]
    cfg["rope_scaling"]["mrope_section"] = [16, 24, 20]
    with pytest.raises(ParameterError, match=r"mrope_section \[16, 24, 20\] sums to 60, but the head rotates 64"):
        make_encoding("rotary", config=str(write_config(tmp_path / "bad", cfg)))


def test_unknown_rope_key_is_refused_and_no_effect_keys_are_recorded(tmp_path):
    cfg = {"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": 2.0, "ntk_mix": 0.5}}
    with pytest.raises(ParameterError, match="a key poslab does not understand: 'ntk_mix' = 0.5"):
        make_encoding("rotary", config=str(write_config(tmp_path / "a", cfg)))
    cfg = {"model_type": "ministral3", "head_dim": 64, "max_position_embeddings": 262144, "rope_parameters": {
        "rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 16384, "llama_4_scaling_beta": 0.1,
        "rope_theta": 1e6}}
    info = _summary(make_encoding("rotary", config=str(write_config(tmp_path / "b", cfg))), 64)
    assert "llama_4_scaling_beta not read: a query temperature" in info["rope_rules"]


def test_llama3_original_length_defaults_to_max_position_embeddings(tmp_path):
    """transformers' standardize_rope_params: a llama3 dict without original_max_position_embeddings uses
    max_position_embeddings (and poslab records that it did)."""
    cfg = {"model_type": "llama", "hidden_size": 512, "num_attention_heads": 4, "max_position_embeddings": 8192,
           "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}}
    r = make_encoding("rotary", config=str(write_config(tmp_path, cfg))).resolve(1, 16)
    np.testing.assert_array_equal(r.inv_freq, rope_parameters(
        "llama3", rotary_dim=128, factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
        original_max_position_embeddings=8192)[0])
    assert r.sources["original_max_position_embeddings"] == "transformers default (max_position_embeddings)"


def test_unknown_architecture_naming_no_rope_key_is_refused_unless_the_base_is_given(tmp_path):
    """QA: a config.json of an unknown model_type with no RoPE key was analysed as base-10000 RoPE (a guess)."""
    sizes = {"hidden_size": 64, "num_attention_heads": 4}
    for cfg in ({"model_type": "mystery", **sizes}, dict(sizes)):
        path = str(write_config(tmp_path / str(len(cfg)), cfg))
        with pytest.raises(ParameterError, match="names no RoPE key.*rope_theta = 10000.0"):
            make_encoding("rotary", config=path)
        r = make_encoding("rotary", config=path, rope_theta=10000.0).resolve(64, 8)
        assert r.sources["rope_theta"] == "inline" and any("generic rules" in rule for rule in r.rules)
    stated = str(write_config(tmp_path / "stated", {"model_type": "mystery", "rope_theta": 5e5, **sizes}))
    r = make_encoding("rotary", config=stated).resolve(64, 8)
    assert r.rope_theta == 5e5 and any("generic rules" in rule for rule in r.rules)
