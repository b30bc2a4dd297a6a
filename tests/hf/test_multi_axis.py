"""Multi-axis RoPE and 2-D sin-cos against transformers' own modules, on the same config and position ids.

M-RoPE (chunked: Qwen2-VL / 2.5-VL; interleaved: Qwen3-VL / 3.5) through the text rotary module with
3-axis position ids of shape (3, batch, seq); the Qwen-VL vision towers' 2-D axial RoPE through their vision
rotary module with (seq, 2) ids; MAE's 2-D sin-cos through ViT-MAE's builder. poslab's configs are the
files transformers writes with ``save_pretrained``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from poslab.encodings import make_encoding  # noqa: E402
from poslab.encodings.axial import grid_points  # noqa: E402

GRID = (3, 4, 5)  # t, h, w: 60 points, coordinates distinct on every axis
N = int(np.prod(GRID))


def _module(module, name):
    return getattr(__import__(f"transformers.models.{module}.modeling_{module}", fromlist=[name]), name)


def _config(module, name):
    return getattr(__import__(f"transformers.models.{module}.configuration_{module}", fromlist=[name]), name)


# model_type -> (module, text config class, rotary class, config kwargs, layout, pairs per axis)
TEXT = {
    "qwen2_vl_text": ("qwen2_vl", "Qwen2VLTextConfig", "Qwen2VLRotaryEmbedding",
                      dict(hidden_size=256, num_attention_heads=2, rope_parameters={
                          "rope_type": "default", "rope_theta": 1e6, "mrope_section": [16, 24, 24]}),
                      "chunked", (16, 24, 24)),
    "qwen2_5_vl_text": ("qwen2_5_vl", "Qwen2_5_VLTextConfig", "Qwen2_5_VLRotaryEmbedding",
                        dict(hidden_size=64, num_attention_heads=2, rope_parameters={
                            "rope_type": "default", "rope_theta": 1e6, "mrope_section": [4, 6, 6]}),
                        "chunked", (4, 6, 6)),
    "qwen3_vl_text": ("qwen3_vl", "Qwen3VLTextConfig", "Qwen3VLTextRotaryEmbedding",
                      dict(hidden_size=256, num_attention_heads=2, head_dim=128, rope_parameters={
                          "rope_type": "default", "rope_theta": 5e6, "mrope_section": [24, 20, 20],
                          "mrope_interleaved": True}),
                      "interleaved", (24, 20, 20)),
    "qwen3_vl_moe_text": ("qwen3_vl_moe", "Qwen3VLMoeTextConfig", "Qwen3VLMoeTextRotaryEmbedding",
                          dict(hidden_size=64, num_attention_heads=2, head_dim=32, rope_parameters={
                              "rope_type": "default", "rope_theta": 5e6, "mrope_section": [6, 5, 5]}),
                          "interleaved", (6, 5, 5)),
    "qwen3_5_text": ("qwen3_5", "Qwen3_5TextConfig", "Qwen3_5TextRotaryEmbedding",
                     dict(hidden_size=512, num_attention_heads=2, head_dim=256, rope_parameters={
                         "rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25,
                         "mrope_section": [11, 11, 10], "mrope_interleaved": True}),
                     "interleaved", (11, 11, 10)),
    "qwen3_5_moe_text": ("qwen3_5_moe", "Qwen3_5MoeTextConfig", "Qwen3_5MoeTextRotaryEmbedding",
                         dict(hidden_size=512, num_attention_heads=2, head_dim=256, rope_parameters={
                             "rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25}),
                         "interleaved", (11, 11, 10)),  # section left out: the module's default [11, 11, 10]
    "paddleocr_vl_text": ("paddleocr_vl", "PaddleOCRTextConfig", "PaddleOCRRotaryEmbedding",
                          dict(hidden_size=256, num_attention_heads=2, head_dim=128),  # default section [16,24,24]
                          "chunked", (16, 24, 24)),
    "cosmos3_edge_text": ("cosmos3_edge", "Cosmos3EdgeTextConfig", "Cosmos3EdgeTextRotaryEmbedding",
                          dict(hidden_size=256, num_attention_heads=2, rope_parameters={
                              "rope_type": "default", "rope_theta": 1e8, "mrope_section": [24, 20, 20]}),
                          "interleaved", (24, 20, 20)),
    "hy_v4_vl_text": ("hy_v4_vl", "HYV4VLTextConfig", "HYV4VLRotaryEmbedding",
                      dict(hidden_size=256, num_attention_heads=2, head_dim=128, rope_parameters={
                          "rope_type": "default", "rope_theta": 1e4}),  # MLA: qk_rope_head_dim 64 rotates;
                      "interleaved", (12, 10, 10)),                     # the class's default section [12, 10, 10]
    "qwen4_exp_text": ("qwen4_exp", "Qwen4ExpTextConfig", "Qwen4ExpTextRotaryEmbedding",
                       dict(hidden_size=512, num_attention_heads=2, head_dim=256, rope_parameters={
                           "rope_type": "default", "rope_theta": 1e7, "partial_rotary_factor": 0.25}),
                       "interleaved", (11, 11, 10)),
}


def _saved(tmp_path, config):
    config.save_pretrained(tmp_path)
    return str(tmp_path / "config.json")


@pytest.mark.parametrize("model_type", list(TEXT))
def test_mrope_equals_the_text_rotary_module_at_grid_position_ids(tmp_path, model_type):
    """cos / sin of every grid point (position ids (3, 1, n): t, h, w) equal transformers' to float32 rounding."""
    module, config_cls, rotary_cls, kwargs, layout, pairs = TEXT[model_type]
    config = _config(module, config_cls)(**kwargs)
    rotary = _module(module, rotary_cls)(config)
    enc = make_encoding("mrope", config=_saved(tmp_path, config), grid="x".join(map(str, GRID)), pairing="half")
    r = enc.resolve(1, N)
    assert r.layout == layout and tuple(r.pairs_per_axis().values()) == pairs
    np.testing.assert_allclose(r.inv_freq, rotary.inv_freq.double().numpy(), rtol=6e-7)  # float32 pow: a few ulps
    ids = torch.from_numpy(grid_points(GRID, N).T.copy())[:, None, :]  # (3, batch 1, seq)
    cos, sin = rotary(torch.zeros(1, N, 8), ids)
    half = len(r.inv_freq)
    ours = enc.generate(N, 1)
    np.testing.assert_allclose(ours[:, :half], cos[0, :, :half].double().numpy(), atol=2e-6)
    np.testing.assert_allclose(ours[:, half:], sin[0, :, :half].double().numpy(), atol=2e-6)
    # the other half of transformers' rotate_half layout repeats the same angles
    np.testing.assert_array_equal(cos[0, :, :half].numpy(), cos[0, :, half:2 * half].numpy())


def test_the_axis_rule_itself_with_float64_angles(tmp_path):
    """At large positions float32 angles drift; the axis assignment is checked exactly on the module's own
    recomposition, applied to the integers 0..n_pairs-1 tagged by axis."""
    module, config_cls, rotary_cls, kwargs, _, _ = TEXT["qwen3_vl_text"]
    rotary = _module(module, rotary_cls)(_config(module, config_cls)(**kwargs))
    tags = torch.stack([torch.full((1, 1, 64), float(a)) for a in range(3)])  # (3, bs, seq, pairs)
    got = rotary.recomposition_frequencies(tags)[0, 0, :64].numpy().astype(int)
    from poslab.encodings.mrope import mrope_axes

    np.testing.assert_array_equal(got, mrope_axes((24, 20, 20), 64, "interleaved"))


VISION = {
    "qwen2_vl_vision": ("qwen2_vl", "Qwen2VLVisionConfig", "Qwen2VLVisionRotaryEmbedding",
                        dict(embed_dim=160, num_heads=2)),
    "qwen2_5_vl_vision": ("qwen2_5_vl", "Qwen2_5_VLVisionConfig", "Qwen2_5_VLVisionRotaryEmbedding",
                          dict(hidden_size=160, num_heads=2)),
    "qwen3_vl_vision": ("qwen3_vl", "Qwen3VLVisionConfig", "Qwen3VLVisionRotaryEmbedding",
                        dict(hidden_size=128, num_heads=2, rope_parameters={"rope_type": "axial", "rope_theta": 100.0})),
}


@pytest.mark.parametrize("model_type", list(VISION))
def test_axial_rope_equals_the_vision_rotary_module(tmp_path, model_type):
    """A vision tower's 2-D RoPE (rope_type axial) from its saved config: cos / sin at (h, w) ids equal."""
    module, config_cls, rotary_cls, kwargs = VISION[model_type]
    config = _config(module, config_cls)(**kwargs)
    rotary = _module(module, rotary_cls)(config)
    grid = GRID[1:]
    n = grid[0] * grid[1]
    enc = make_encoding("axial_rope", config=_saved(tmp_path, config), grid=f"{grid[0]}x{grid[1]}", pairing="half")
    r = enc.resolve()
    quarter = len(r.inv_freq) // 2
    np.testing.assert_allclose(r.inv_freq[:quarter], rotary.inv_freq.double().numpy(), rtol=6e-7)  # float32 pow: a few ulps
    np.testing.assert_array_equal(r.inv_freq[:quarter], r.inv_freq[quarter:])  # h and w share the frequencies
    ids = torch.from_numpy(grid_points(grid, n))  # (seq, 2): h, w
    cos, sin = rotary(torch.zeros(n, 8), ids)
    half = len(r.inv_freq)
    ours = enc.generate(n, 1)
    np.testing.assert_allclose(ours[:, :half], cos[:, :half].double().numpy(), atol=2e-6)
    np.testing.assert_allclose(ours[:, half:], sin[:, :half].double().numpy(), atol=2e-6)


def test_axial_rope_reads_the_vision_tower_of_a_whole_multimodal_config(tmp_path):
    config = transformers.Qwen2VLConfig(vision_config={"embed_dim": 160, "num_heads": 2},
                                        text_config={"hidden_size": 64, "num_attention_heads": 2})
    path = _saved(tmp_path, config)
    enc = make_encoding("axial_rope", config=path, grid="4x5")
    assert enc.resolve().pairs_per_axis() == {"h": 20, "w": 20}
    assert any("vision_config" in rule for rule in enc.resolve().rules)
    # its text part has head_dim 32 and no mrope_section: the module's default [16, 24, 24] needs 64 pairs
    with pytest.raises(ValueError, match=r"mrope_section \[16, 24, 24\] sums to 64, but the head rotates 16 .*"
                                         r"architecture default \(qwen2_vl_text\)"):
        make_encoding("mrope", config=path, grid="1x4x5").generate(20, 1)


def test_mae_sincos_equals_transformers_vit_mae():
    build = _module("vit_mae", "build_2d_sinusoidal_position_embedding")
    ref = build(height=6, width=6, embed_dim=32, cls_token=False).double().numpy()
    ref = np.concatenate([ref[:, 16:], ref[:, :16]], axis=1)  # ViT-MAE swaps the halves (MAE's w-first order)
    ours = make_encoding("sincos2d", grid="6x6").generate(36, 32)
    np.testing.assert_allclose(ours, ref, atol=1e-12)


def test_rotary_refuses_an_axial_vision_config_naming_the_kind_that_reads_it(tmp_path):
    config = _config("qwen2_vl", "Qwen2VLVisionConfig")(embed_dim=160, num_heads=2)
    with pytest.raises(ValueError, match='rope_type \'axial\'.*kind = "axial_rope"'):
        make_encoding("rotary", config=_saved(tmp_path, config))


def test_mrope_refuses_a_multimodal_architecture_it_does_not_read(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "glm4v_text", "hidden_size": 64, "num_attention_heads": 2,
        "rope_parameters": {"rope_type": "default", "mrope_section": [2, 3, 3], "partial_rotary_factor": 0.5}}))
    with pytest.raises(ValueError, match="glm4v_text.*not a language model whose M-RoPE poslab reads"):
        make_encoding("mrope", config=str(tmp_path), grid="1x2x2")


# The RoPE-relevant keys of published config.json files (Qwen3-VL-8B-Instruct, Qwen2.5-VL-7B-Instruct), with
# transformers 4 names; sizes as published.
PUBLISHED = {
    "Qwen3-VL-8B-Instruct": {
        "model_type": "qwen3_vl",
        "text_config": {"model_type": "qwen3_vl_text", "hidden_size": 4096, "num_attention_heads": 32,
                        "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 262144,
                        "rope_theta": 5000000, "rope_scaling": {"mrope_interleaved": True,
                                                                "mrope_section": [24, 20, 20], "rope_type": "default"}},
        "vision_config": {"model_type": "qwen3_vl", "hidden_size": 1152, "num_heads": 16, "depth": 27,
                          "patch_size": 16, "spatial_merge_size": 2}},
    "Qwen2.5-VL-7B-Instruct (flat)": {
        "model_type": "qwen2_5_vl", "hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4,
        "max_position_embeddings": 128000, "rope_theta": 1000000.0,
        "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
        "vision_config": {"hidden_size": 1280, "num_heads": 16, "depth": 32, "model_type": "qwen2_5_vl"}},
}


@pytest.mark.parametrize("name", list(PUBLISHED))
def test_published_configs_read_as_transformers_reads_them(tmp_path, name):
    """The published file, read by poslab (mrope for the language model, axial_rope for the vision tower) and by
    transformers (AutoConfig, then the rotary modules): equal frequencies, sections and cos / sin at grid ids."""
    (tmp_path / "config.json").write_text(json.dumps(PUBLISHED[name]))
    config = transformers.AutoConfig.from_pretrained(tmp_path)
    text, vision = config.get_text_config(), config.vision_config
    module = {"qwen3_vl": "qwen3_vl", "qwen2_5_vl": "qwen2_5_vl"}[config.model_type]
    prefix = {"qwen3_vl": "Qwen3VL", "qwen2_5_vl": "Qwen2_5_VL"}[config.model_type]
    text_rotary = _module(module, f"{prefix}TextRotaryEmbedding" if module == "qwen3_vl" else
                          f"{prefix}RotaryEmbedding")(text)
    enc = make_encoding("mrope", config=str(tmp_path), grid="x".join(map(str, GRID)), pairing="half")
    r = enc.resolve(1, N)
    np.testing.assert_allclose(r.inv_freq, text_rotary.inv_freq.double().numpy(), rtol=6e-7)
    cos, _ = text_rotary(torch.zeros(1, N, 8), torch.from_numpy(grid_points(GRID, N).T.copy())[:, None, :])
    np.testing.assert_allclose(enc.generate(N, 1)[:, :len(r.inv_freq)], cos[0, :, :len(r.inv_freq)].double().numpy(),
                               atol=2e-6)
    vision_rotary = _module(module, f"{prefix}VisionRotaryEmbedding")(vision)
    ax = make_encoding("axial_rope", config=str(tmp_path), grid="4x5", pairing="half")
    quarter = len(ax.resolve().inv_freq) // 2
    np.testing.assert_allclose(ax.resolve().inv_freq[:quarter], vision_rotary.inv_freq.double().numpy(), rtol=6e-7)
    vcos, _ = vision_rotary(torch.zeros(20, 8), torch.from_numpy(grid_points((4, 5), 20)))
    np.testing.assert_allclose(ax.generate(20, 1)[:, :2 * quarter], vcos[:, :2 * quarter].double().numpy(), atol=2e-6)


def _vision_rotary(model_type):
    """(config class, the vision rotary module class) of a vision tower type in transformers."""
    import importlib
    import inspect

    cls = transformers.CONFIG_MAPPING[model_type]
    mod = importlib.import_module(cls.__module__.replace("configuration_", "modeling_"))
    rotary = [c for n, c in inspect.getmembers(mod, inspect.isclass)
              if n.endswith("RotaryEmbedding") and "Vision" in n and c.__module__ == mod.__name__]
    return cls, rotary[0]


@pytest.mark.parametrize("model_type", __import__("poslab.encodings.axial", fromlist=["x"]).AXIAL_CONFIGS)
def test_every_axial_tower_poslab_reads_equals_its_module(tmp_path, model_type):
    """Each vision tower in AXIAL_CONFIGS, its config class at its defaults saved with save_pretrained (only the
    keys that differ from the defaults are written), read by axial_rope: inv_freq and cos / sin at (h, w) ids
    equal its transformers rotary module's."""
    cls, rotary_cls = _vision_rotary(model_type)
    config = cls(rope_parameters={"rope_type": "axial", "rope_theta": 321.0})
    rotary = rotary_cls(config)
    enc = make_encoding("axial_rope", config=_saved(tmp_path, config), grid="3x5", pairing="half")
    r = enc.resolve()
    quarter = len(r.inv_freq) // 2
    assert r.rope_theta == 321.0
    np.testing.assert_allclose(r.inv_freq[:quarter], rotary.inv_freq.double().numpy(), rtol=6e-7)
    cos, sin = rotary(torch.zeros(15, 8), torch.from_numpy(grid_points((3, 5), 15)))
    np.testing.assert_allclose(enc.generate(15, 1), np.concatenate(
        [cos[:, :2 * quarter].double().numpy(), sin[:, :2 * quarter].double().numpy()], axis=1), atol=2e-6)
