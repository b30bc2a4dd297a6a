"""ALiBi: attention with linear biases (Press, Smith & Lewis, "Train Short, Test Long", ICLR 2022).

Head h adds −m_h·|i − j| to the attention logit of query i and key j; there is
no position table. Its kernel on the ``attention_prior`` scale
(:mod:`poslab.encodings.kernel`) is exp(−m_h·k) at distance k: head h's
attention to a key k positions away is e^(−m_h k) times its attention to the
query's own position when contents score alike, so it first falls below 1/e
just beyond k = 1/m_h.

Slopes (:func:`alibi_slopes`), the rule of the authors' ``get_slopes``
(ofirpress/attention_with_linear_biases, ``fairseq/models/transformer.py``):
for n heads a power of two, m_h = 2^(−8h/n), h = 1..n; otherwise the n' = 2^⌊log₂ n⌋
slopes of n', then every other slope (h odd) of 2n', the first n − n' of them.
BLOOM uses that rule (transformers' ``_get_alibi_slopes``), with no config key:
ALiBi is implied by the architecture and the head count is ``n_head``
(``num_attention_heads``). MPT's rule (llm-foundry ``gen_slopes``, transformers'
``build_mpt_alibi_tensor``) takes N = 2^⌈log₂ n⌉ slopes 2^(−h·alibi_bias_max/N),
then the odd-indexed ones (h even) followed by the even-indexed ones, the first
n: the same values for ``alibi_bias_max`` = 8 (Press et al.'s 8), others for
another maximum. Both models add slope × key position (BLOOM) or
slope × (key − last position) (MPT) to every row, which differs from
−m_h·(i − j) by a constant per row: the same attention after softmax on the
causal rows those decoders use (Press et al.'s implementation note).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np

from .._validation import AnyOf, Integer, NoneValue, Real
from .base import Encoding, ParameterError, TableCost, parameter
from .kernel import Kernel, attention_prior
from .registry import register

__all__ = ["Alibi", "AlibiConfig", "alibi_slopes", "read_alibi_config"]


def alibi_slopes(n_heads: int, *, alibi_bias_max: float = 8.0) -> np.ndarray:
    """Per-head ALiBi slopes m_h, in logit units per position (module docstring).

    Parameters
    ----------
    n_heads : int
        Number of attention heads, >= 1.
    alibi_bias_max : float
        The exponent range: 8 gives Press et al.'s slopes (and BLOOM's, and
        MPT's default); another value is MPT's ``alibi_bias_max`` rule.

    Returns
    -------
    ndarray of shape (n_heads,), float64, in (0, 1), head order.

    Notes
    -----
    8 heads: 1/2, 1/4, ..., 1/256; 16 heads: 2^(−k/2), k = 1..16; 12 heads: the
    8-head slopes then 2^(−1/2), 2^(−3/2), 2^(−5/2), 2^(−7/2).
    """
    n = int(n_heads)
    if n < 1:
        raise ValueError(f"n_heads must be >= 1, got {n_heads}")
    if alibi_bias_max == 8.0:  # Press et al.'s get_slopes, as BLOOM computes it
        low = 2 ** math.floor(math.log2(n))
        slopes = 2.0 ** (-8.0 * np.arange(1, low + 1) / low)
        if low == n:
            return slopes
        extra = 2.0 ** (-8.0 * np.arange(1, 2 * low + 1, 2) / (2 * low))
        return np.concatenate([slopes, extra[:n - low]])
    high = 2 ** math.ceil(math.log2(n))  # MPT's gen_slopes
    slopes = 2.0 ** (-np.arange(1, high + 1) * (float(alibi_bias_max) / high))
    if high == n:
        return slopes
    return np.concatenate([slopes[1::2], slopes[::2]])[:n]


@dataclasses.dataclass(frozen=True)
class AlibiConfig:
    """What a BLOOM or MPT ``config.json`` says about ALiBi.

    Attributes
    ----------
    path : str
        The config.json read.
    model_type : {"bloom", "mpt"}
    n_heads : int
    alibi_bias_max : float
    sources : dict
        Value name → ``config: KEY`` or ``architecture default (MODEL_TYPE)``.
    """

    path: str
    model_type: str
    n_heads: int
    alibi_bias_max: float
    sources: dict


def read_alibi_config(path) -> AlibiConfig:
    """The ALiBi head count and bias maximum of a BLOOM or MPT model's config.json.

    Parameters
    ----------
    path : str or os.PathLike
        A config.json, a model folder, a Hugging Face cache snapshot or a Hub
        id (:func:`poslab.encodings.model_config.config_path`).

    Returns
    -------
    AlibiConfig

    Raises
    ------
    ValueError
        No config.json, invalid JSON, a model_type other than bloom or mpt, an
        MPT config with ``attn_config.alibi`` false (learned positions), or a
        head count that is not a positive integer.
    """
    from .model_config import config_path

    file = config_path(path)
    try:
        cfg = json.loads(Path(file).read_text(encoding="utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{file}: not a valid JSON config.json ({exc})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{file}: expected a JSON object, got {type(cfg).__name__}")
    model_type = cfg.get("model_type")
    sources = {}
    if model_type == "bloom":  # ALiBi is the architecture: no key says so
        key = next((k for k in ("n_head", "num_attention_heads") if k in cfg), None)
        n_heads = cfg.get(key, 8)  # transformers' BloomConfig default n_head = 8
        sources["n_heads"] = f"config: {key}" if key else "architecture default (bloom)"
        bias_max, sources["alibi_bias_max"] = 8.0, "architecture default (bloom: Press et al.'s slopes)"
    elif model_type == "mpt":
        attn = cfg.get("attn_config", {})
        if not isinstance(attn, dict):
            raise ValueError(f"{file}: attn_config must be a JSON object, got {attn!r}")
        if attn.get("alibi", True) is not True:  # MptAttentionConfig: alibi defaults to True
            raise ValueError(f"{file}: attn_config.alibi = {attn.get('alibi')!r}: this MPT model does not use ALiBi "
                             "(it uses learned absolute positions); analyse it with kind = \"learned\"")
        key = next((k for k in ("n_heads", "num_attention_heads") if k in cfg), None)
        n_heads = cfg.get(key, 16)  # MptConfig default n_heads = 16
        sources["n_heads"] = f"config: {key}" if key else "architecture default (mpt)"
        bias_max = attn.get("alibi_bias_max", 8)
        sources["alibi_bias_max"] = ("config: attn_config.alibi_bias_max" if "alibi_bias_max" in attn
                                     else "architecture default (mpt)")
        if isinstance(bias_max, bool) or not isinstance(bias_max, (int, float)) or not bias_max > 0:
            raise ValueError(f"{file}: attn_config.alibi_bias_max must be a positive number, got {bias_max!r}")
    else:
        raise ValueError(f"{file}: model_type {model_type!r} is not an ALiBi architecture poslab reads (bloom: "
                         "ALiBi implied; mpt: attn_config.alibi); give n_heads inline instead of config")
    if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads < 1:
        raise ValueError(f"{file}: {sources['n_heads'].removeprefix('config: ')} must be a positive integer, "
                         f"got {n_heads!r}")
    return AlibiConfig(str(file), model_type, n_heads, float(bias_max), sources)


@register
@dataclasses.dataclass(frozen=True)
class Alibi(Encoding):
    """ALiBi linear biases as a kernel: head h's attention prior exp(−m_h·k) (module docstring).

    Parameters
    ----------
    n_heads : int or None
        Heads (slopes). None: the config's, else 8.
    config : str or None
        A BLOOM or MPT ``config.json`` or model folder (:func:`read_alibi_config`).
    alibi_bias_max : float or None
        MPT's slope range (8: Press et al.'s slopes). None: the config's, else 8.
    direction : {"causal", "bidirectional"}
        Which keys the bias reaches: ``causal`` (decoders: BLOOM, MPT, Press et
        al.'s language models) or ``bidirectional`` (−m_h·|i − j| on both sides,
        as ALiBi encoders use it; not with a BLOOM / MPT config, whose
        slope × key-position form equals ALiBi's on causal rows only).
    """

    kind = "alibi"
    generates_table = False
    path_params = ("config",)
    unset_defaults: ClassVar[dict[str, str]] = {
        "n_heads": "from config, else 8",
        "config": "none: n_heads inline",
        "alibi_bias_max": "from config (mpt), else 8 (Press et al.)",
    }

    n_heads: int | None = parameter(None, check=AnyOf((Integer(minimum=1, maximum=4096), NoneValue())),
                                    doc="attention heads (one slope each)")
    config: str | None = None
    alibi_bias_max: float | None = parameter(None, check=AnyOf((Real(minimum=0, open_min=True, maximum=64),
                                                                NoneValue())), doc="MPT's slope range")
    direction: Literal["causal", "bidirectional"] = "causal"

    def _check_params(self):
        cfg = self.read_config()
        if cfg is not None and self.direction != "causal":
            raise ParameterError(f"alibi: config {self.config} is a {cfg.model_type} decoder: its bias (slope x key "
                                 "position) is ALiBi's on causal rows only; use direction = \"causal\"")

    def read_config(self) -> AlibiConfig | None:
        """The BLOOM / MPT config's reading, None without one (ParameterError when it cannot be read)."""
        if self.config is None:
            return None
        try:
            return _read(self.config)
        except ValueError as exc:
            raise ParameterError(f"alibi: config: {exc}") from None

    def resolved(self) -> dict[str, Any]:
        """n_heads, alibi_bias_max and where each came from (inline, the config, the default)."""
        cfg = self.read_config()
        out, sources = {}, {}
        for name, default in (("n_heads", 8), ("alibi_bias_max", 8.0)):
            if getattr(self, name) is not None:
                out[name], sources[name] = getattr(self, name), "inline"
            elif cfg is not None:
                out[name], sources[name] = getattr(cfg, name), cfg.sources[name]
            else:
                out[name], sources[name] = default, "default"
        return out | {"sources": sources}

    def slopes(self) -> np.ndarray:
        """The slopes used, shape (n_heads,), logit units per position."""
        r = self.resolved()
        return alibi_slopes(r["n_heads"], alibi_bias_max=r["alibi_bias_max"])

    def table_cost(self, n_positions, dim):
        heads = self.resolved()["n_heads"]
        return TableCost(table_dim=0, peak_bytes=4 * 8 * heads * int(n_positions))

    def _kernel(self, n_positions, max_distance, dim):
        slopes = self.slopes()
        k = np.arange(max_distance + 1)
        backward = attention_prior(-np.outer(slopes, k))  # bias −m_h·k at key − query = −k
        if self.direction == "causal":
            forward = np.full_like(backward, np.nan)
            forward[:, 0] = 1.0
        else:
            forward = backward
        r = self.resolved()
        notes = [f"ALiBi {name} = {r[name]:g} ({source})" for name, source in r["sources"].items()
                 if source != "inline"]
        cfg = self.read_config()
        if cfg is not None and cfg.model_type == "mpt" and r["alibi_bias_max"] != 8:
            notes.append(f"mpt alibi_bias_max = {r['alibi_bias_max']:g}: slopes by llm-foundry's gen_slopes, which "
                         "reads it (transformers 5.24's MptModel ignores it and uses 8)")
        return Kernel("attention_prior", k, forward, backward, heads=tuple(str(h) for h in range(slopes.size)),
                      direction=self.direction, head_parameters={"slope": tuple(slopes)}, notes=tuple(notes))


def _read(path: str) -> AlibiConfig:
    file = Path(path)
    if file.exists():
        stat = file.stat()
        return _read_cached(str(file.absolute()), stat.st_mtime_ns)
    return read_alibi_config(path)  # a Hub id or cache entry: resolved each time (cheap)


@functools.lru_cache(maxsize=64)
def _read_cached(path: str, mtime_ns: int) -> AlibiConfig:
    return read_alibi_config(path)
