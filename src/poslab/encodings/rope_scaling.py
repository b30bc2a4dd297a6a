"""RoPE scaling types of Hugging Face transformers, in float64.

Each Hugging Face ``rope_type`` turns the default frequencies
θ_i = rope_theta^(−2i/d), i = 0 .. d/2 − 1 (d = rotary_dim), into the
frequencies a model actually uses, plus an *attention factor*: the factor
transformers multiplies cos and sin by (``attention_scaling`` of its rotary
embedding modules). :func:`rope_parameters` computes both, following
``transformers/modeling_rope_utils.py`` (the ``_compute_*_parameters``
functions, transformers 4.45 – 5.24; their defaults are noted per type), but in
float64 where transformers uses float32.

============  ===========================================================  =============================================
rope_type     inv_freq                                                      source
============  ===========================================================  =============================================
default       θ_i                                                           Su et al. 2021 (RoFormer);
                                                                            ``compute_default_rope_parameters``
linear        θ_i / factor                                                  Chen et al. 2023 (position interpolation),
                                                                            kaiokendev; ``_compute_linear_scaling_...``
dynamic       θ_i with rope_theta' = rope_theta·(factor·L/M − (factor−1))   bloc97 / emozilla (dynamic NTK);
              ^(d/(d−2)), L = max(seq_len, M), M = max_position_embeddings  ``_compute_dynamic_ntk_parameters``;
              or, with ``alpha``: rope_theta' = rope_theta·alpha^(d/(d−2))  Hunyuan's NTK-alpha (static)
yarn          θ_i·(1 − r_i) + (θ_i/factor)·r_i, ramp r_i from the           Peng et al. 2023 (YaRN, arXiv:2309.00071);
              correction range of beta_fast / beta_slow                     ``_compute_yarn_parameters``
longrope      θ_i / ext_i, ext = long_factor if seq_len > original length,  Ding et al. 2024 (LongRoPE, arXiv:2402.13753);
              else short_factor                                             ``_compute_longrope_parameters``
llama3        θ_i for wavelengths < original/high_freq_factor, θ_i/factor   Meta Llama 3.1 (2024);
              above original/low_freq_factor, smoothed in between           ``_compute_llama3_parameters``
proportional  the first int(p·D/2) pairs θ_i = rope_theta^(−2i/D) with the  Barbero et al. 2025 (p-RoPE, Gemma 4);
              full head width D, the other pairs frequency 0; all / factor  ``_compute_proportional_rope_parameters``
============  ===========================================================  =============================================

The defaults transformers applies are applied here, and nothing else is
guessed: missing required parameters, unknown parameters and impossible
values raise ``ValueError`` naming them.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .._validation import Boolean, Integer, ListOf, Real, check

__all__ = [
    "ROPE_TYPES",
    "SCALING_KEYS",
    "CONSTRAINTS",
    "DEFAULTS",
    "LIST_KEYS",
    "rope_inv_freq",
    "rope_parameters",
    "rope_attention_factor",
    "check_rope_scaling",
    "rope_scaling_keys",
    "dynamic_rope_theta",
    "ntk_alpha_rope_theta",
    "yarn_correction_range",
    "yarn_attention_factor",
    "longrope_attention_factor",
]

#: Hugging Face rope types: ``default`` and the keys of transformers' ``ROPE_INIT_FUNCTIONS``, in its order.
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional")

# rope_type -> (required keys, optional keys), Hugging Face names. "factor or max/original" alternatives are
# resolved in _standardize, mirroring transformers' ``standardize_rope_params`` before its ``_validate_*`` functions.
# The one table of scaling keys: Rotary's inline fields and model_config's reading both derive from it.
_KEYS = {
    "default": ((), ()),
    "linear": (("factor",), ()),
    "dynamic": (("factor", "max_position_embeddings"), ("alpha",)),
    "yarn": (
        ("factor", "original_max_position_embeddings"),
        ("max_position_embeddings", "attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate"),
    ),
    "longrope": (
        ("short_factor", "long_factor", "original_max_position_embeddings"),
        ("max_position_embeddings", "factor", "attention_factor", "short_mscale", "long_mscale"),
    ),
    "llama3": (("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
               ("max_position_embeddings",)),
    "proportional": ((), ("factor", "partial_rotary_factor")),
}

#: Every scaling parameter of some rope type (Hugging Face names), each once.
SCALING_KEYS = tuple(dict.fromkeys(k for required, optional in _KEYS.values() for k in required + optional))
#: Scaling parameters that are lists (one number per frequency pair): given in a config.json only.
LIST_KEYS = ("short_factor", "long_factor")
_POSITIVE = Real(minimum=0, open_min=True)
#: What each scaling parameter accepts: the one table that checks inline values (Rotary's fields) and
#: config values (:func:`check_rope_scaling`), with the message style of :mod:`poslab._validation`.
CONSTRAINTS = {
    **dict.fromkeys(("factor", "alpha", "attention_factor", "beta_fast", "beta_slow", "low_freq_factor",
                     "high_freq_factor", "short_mscale", "long_mscale"), _POSITIVE),
    "mscale": Real(), "mscale_all_dim": Real(),
    "original_max_position_embeddings": Integer(minimum=1), "max_position_embeddings": Integer(minimum=1),
    "truncate": Boolean(),
    "short_factor": ListOf(_POSITIVE), "long_factor": ListOf(_POSITIVE),
    "partial_rotary_factor": Real(minimum=0, maximum=1, open_min=True),
}
#: transformers' values of the optional scaling parameters that have one (``_compute_yarn_parameters``).
DEFAULTS = {"beta_fast": 32.0, "beta_slow": 1.0, "truncate": True}
#: rope_theta: a base > 1.
ROPE_THETA = Real(minimum=1, open_min=True)


def rope_inv_freq(rotary_dim: int, rope_theta: float = 10000.0) -> np.ndarray:
    """Inverse frequencies θ_i = rope_theta^(−2i/rotary_dim), i = 0 .. rotary_dim/2 − 1.

    As ``inv_freq`` in Hugging Face transformers' ``compute_default_rope_parameters``,
    but in float64 (Su et al. 2021, RoFormer, eq. 15).

    Returns
    -------
    ndarray of shape (rotary_dim // 2,), radians per position.

    Raises
    ------
    ValueError
        ``rotary_dim`` not an even integer >= 2.
    """
    if isinstance(rotary_dim, bool) or not isinstance(rotary_dim, numbers.Integral) or rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(f"rotary_dim must be an even integer >= 2, got {rotary_dim!r}")
    return rope_theta ** (-np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)


def rope_scaling_keys(rope_type: str) -> tuple[str, ...]:
    """Every scaling parameter ``rope_type`` reads (Hugging Face names), required ones first.

    Raises
    ------
    ValueError
        Unknown rope type; the message lists :data:`ROPE_TYPES`.
    """
    required, optional = _KEYS[_check_type(rope_type)]
    return required + optional


def _check_type(rope_type) -> str:
    if rope_type not in _KEYS:
        hint = " ('su' is the old name of 'longrope')" if rope_type == "su" else ""
        raise ValueError(f"unknown rope_type {rope_type!r}{hint}; valid: {', '.join(ROPE_TYPES)}")
    return rope_type


def _standardize(rope_type: str, params: dict) -> dict:
    """transformers' defaults: original length from max_position_embeddings, factor from their ratio."""
    p = {k: v for k, v in params.items() if v is not None}
    if rope_type in ("yarn", "longrope", "llama3") and "original_max_position_embeddings" not in p \
            and "max_position_embeddings" in p:
        # ``standardize_rope_params``: the pretraining length defaults to max_position_embeddings
        p["original_max_position_embeddings"] = p["max_position_embeddings"]
    if rope_type in ("yarn", "longrope") and "factor" not in p \
            and "max_position_embeddings" in p and "original_max_position_embeddings" in p:
        # ``_compute_yarn_parameters`` / ``_compute_longrope_parameters``: factor = extended / original length
        p["factor"] = p["max_position_embeddings"] / p["original_max_position_embeddings"]
    return p


def check_rope_scaling(rope_type: str = "default", **params) -> dict:
    """Validate scaling parameters for ``rope_type``; return them with transformers' defaults filled in.

    Parameters
    ----------
    rope_type : str
        One of :data:`ROPE_TYPES`.
    **params
        Scaling parameters by their Hugging Face names; ``None`` means not given.

    Returns
    -------
    dict
        The given parameters (None dropped) plus ``original_max_position_embeddings``
        (default: ``max_position_embeddings``, for yarn, longrope and llama3) and
        ``factor`` (default: max / original length, for yarn and longrope).

    Raises
    ------
    ValueError
        Unknown rope type, a parameter the type does not use, a missing required
        one, or a value of the wrong type or range; the message names it.
    """
    required, optional = _KEYS[_check_type(rope_type)]
    unused = sorted(k for k, v in params.items() if v is not None and k not in required + optional)
    if unused:
        uses = ", ".join(required + optional) or "no scaling parameters"
        raise ValueError(f"rope_type {rope_type!r} does not use {', '.join(unused)}; it uses: {uses}")
    p = _standardize(rope_type, params)
    if rope_type == "dynamic" and "alpha" in p:  # Hunyuan's NTK-alpha: a static base, no length needed
        required = ()
    missing = [k for k in required if k not in p]
    if missing:
        how = {
            "factor": "factor",
            "original_max_position_embeddings": "original_max_position_embeddings (or max_position_embeddings)",
            "max_position_embeddings": "max_position_embeddings (or alpha, for NTK-alpha as in Hunyuan)",
        }
        raise ValueError(f"rope_type {rope_type!r} needs {', '.join(how.get(k, k) for k in missing)}")
    for key, value in p.items():
        p[key] = check(value, CONSTRAINTS[key], key)
    if rope_type == "llama3" and p["high_freq_factor"] < p["low_freq_factor"]:
        raise ValueError(
            f"high_freq_factor must be >= low_freq_factor (equal: a hard cut, as Llama 4), got "
            f"{p['high_freq_factor']} and {p['low_freq_factor']}")
    if rope_type == "longrope" and "attention_factor" not in p and "factor" not in p \
            and not ("short_mscale" in p and "long_mscale" in p):
        raise ValueError("rope_type 'longrope' needs factor (or max_position_embeddings) for its attention factor, "
                         "or an explicit attention_factor")
    if rope_type == "longrope" and ("short_mscale" in p) != ("long_mscale" in p):
        raise ValueError("longrope: give both short_mscale and long_mscale (the attention factor up to and beyond "
                         "original_max_position_embeddings, as PhiMoE), or neither")
    if rope_type == "yarn":
        beta_fast, beta_slow = (p.get(k, DEFAULTS[k]) for k in ("beta_fast", "beta_slow"))
        if beta_fast < beta_slow:
            raise ValueError(f"beta_fast must be >= beta_slow (defaults 32 and 1), got {beta_fast:g} and {beta_slow:g}")
    return p


def _check_ntk_width(rotary_dim: int) -> None:
    if rotary_dim <= 2:
        raise ValueError(f"dynamic NTK scaling raises the base to the power d/(d−2), undefined for rotary_dim = "
                         f"{rotary_dim}; it needs rotary_dim >= 4 (use another rope_type for a single frequency pair)")


def dynamic_rope_theta(rope_theta: float, rotary_dim: int, factor: float, max_position_embeddings: int,
                       seq_len: int | None = None) -> float:
    """Base of dynamic NTK scaling at sequence length ``seq_len``.

    rope_theta' = rope_theta · (factor · L / M − (factor − 1))^(d / (d − 2)), with
    L = max(seq_len, M) and M = max_position_embeddings: up to M the base is
    unchanged. Source: transformers ``_compute_dynamic_ntk_parameters``
    (dynamic NTK-aware scaling, /u/bloc97 and /u/emozilla, 2023).

    Returns
    -------
    float
        The base actually used (e.g. 10000 → 30527.74 at L = 4096 for
        factor 2, M = 2048, d = 128).

    Raises
    ------
    ValueError
        ``rotary_dim`` <= 2 (the exponent d/(d − 2) is undefined).
    """
    _check_ntk_width(rotary_dim)
    length = max_position_embeddings if seq_len is None else max(int(seq_len), max_position_embeddings)
    return rope_theta * (factor * length / max_position_embeddings - (factor - 1)) ** (rotary_dim / (rotary_dim - 2))


def ntk_alpha_rope_theta(rope_theta: float, rotary_dim: int, alpha: float) -> float:
    """Base of NTK-alpha scaling: rope_theta · alpha^(d / (d − 2)), independent of the length.

    Hunyuan configs write it as ``{"type": "dynamic", "alpha": 1000.0, "factor": 1.0}``;
    transformers' Hunyuan rotary embeddings (``compute_ntk_alpha_rope_parameters``)
    compute a static base from ``alpha`` and ignore ``factor``. Source: NTK-aware
    scaled RoPE (/u/bloc97, 2023), base b·α^(d/(d−2)).

    Raises
    ------
    ValueError
        ``rotary_dim`` <= 2.
    """
    _check_ntk_width(rotary_dim)
    return rope_theta * alpha ** (rotary_dim / (rotary_dim - 2))


def yarn_correction_range(rotary_dim: int, rope_theta: float, original_max_position_embeddings: int,
                          beta_fast: float = 32.0, beta_slow: float = 1.0, truncate: bool = True) -> tuple[float, float]:
    """YaRN's correction range: the pair indices between which the ramp goes from θ_i to θ_i/factor.

    The pair whose frequency turns ``r`` times over the original length L is
    i(r) = d · ln(L / (2π r)) / (2 ln rope_theta); low = i(beta_fast),
    high = i(beta_slow), floored / ceiled when ``truncate``, clipped to [0, d − 1].
    Source: Peng et al. 2023 (YaRN, arXiv:2309.00071), "NTK-by-parts" interpolation; transformers
    ``_compute_yarn_parameters`` (``find_correction_range``).

    Returns
    -------
    (low, high) : floats (integral when ``truncate``), pair indices.
    """
    def pair(rotations):
        return rotary_dim * math.log(original_max_position_embeddings / (rotations * 2 * math.pi)) / (2 * math.log(rope_theta))

    low, high = pair(beta_fast), pair(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    return max(low, 0), min(high, rotary_dim - 1)


def _yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def yarn_attention_factor(factor: float, mscale: float | None = None, mscale_all_dim: float | None = None) -> float:
    """YaRN's attention factor: 0.1·ln(factor) + 1 (1 for factor ≤ 1).

    With both ``mscale`` and ``mscale_all_dim`` non-zero (DeepSeek-V2/V3 configs)
    it is (0.1·mscale·ln f + 1) / (0.1·mscale_all_dim·ln f + 1). An explicit
    ``attention_factor`` replaces both rules (handled by :func:`rope_parameters`).
    Source: Peng et al. 2023 (YaRN), attention temperature √(1/t) = 0.1 ln s + 1;
    transformers ``_compute_yarn_parameters`` (``get_mscale``).
    """
    if mscale and mscale_all_dim:
        return float(_yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all_dim))
    return _yarn_mscale(factor)


def longrope_attention_factor(factor: float, original_max_position_embeddings: int) -> float:
    """LongRoPE's attention factor √(1 + ln(factor) / ln(original length)), 1 for factor ≤ 1.

    Source: transformers ``_compute_longrope_parameters`` (Phi-3; Ding et al. 2024).
    """
    if factor <= 1.0:
        return 1.0
    return math.sqrt(1 + math.log(factor) / math.log(original_max_position_embeddings))


def rope_parameters(rope_type: str = "default", *, rotary_dim: int, rope_theta: float = 10000.0,
                    seq_len: int | None = None, **scaling) -> tuple[np.ndarray, float]:
    """Frequencies and attention factor of a Hugging Face RoPE type, in float64.

    Parameters
    ----------
    rope_type : {"default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional"}
    rotary_dim : int
        Number of rotated dims d (even; head_dim · partial_rotary_factor). For
        ``proportional`` the whole head width D: the un-rotated pairs are part
        of the result, with frequency 0.
    rope_theta : float
        Base of the default frequencies, > 1.
    seq_len : int, optional
        The analysed sequence length (positions 0 .. seq_len − 1). Used by
        ``dynamic`` (the base grows beyond max_position_embeddings) and
        ``longrope`` (long factors and ``long_mscale`` beyond
        original_max_position_embeddings), as transformers does at inference;
        ignored by the others. None is transformers' initial state (no dynamic
        growth, short factors).
    **scaling
        Hugging Face scaling parameters, see :func:`check_rope_scaling`:
        ``factor``; ``max_position_embeddings``; ``original_max_position_embeddings``;
        dynamic ``alpha``; llama3 ``low_freq_factor``, ``high_freq_factor``; yarn
        ``beta_fast`` (32), ``beta_slow`` (1), ``mscale``, ``mscale_all_dim``,
        ``truncate`` (True), ``attention_factor``; longrope ``short_factor``,
        ``long_factor`` (lists of d/2 numbers), ``attention_factor``,
        ``short_mscale``, ``long_mscale``; proportional ``partial_rotary_factor``
        (1), ``factor`` (1).

    Returns
    -------
    inv_freq : ndarray of shape (rotary_dim // 2,), float64
        Radians per position, pair i.
    attention_factor : float
        Factor on cos and sin (1.0 except for yarn and longrope).

    Raises
    ------
    ValueError
        Bad rotary_dim or rope_theta, unknown rope type, missing, unused or
        invalid scaling parameters, longrope factor lists of the wrong length,
        dynamic scaling of a single pair.

    Notes
    -----
    Per type (d = rotary_dim, θ_i = rope_theta^(−2i/d), i = 0 .. d/2 − 1):

    - ``default``: θ_i (Su et al. 2021, RoFormer, arXiv:2104.09864).
    - ``linear``: θ_i / factor (position interpolation; Chen et al. 2023, arXiv:2306.15595).
    - ``dynamic``: θ_i recomputed with :func:`dynamic_rope_theta` at ``seq_len``;
      with ``alpha``, with the static :func:`ntk_alpha_rope_theta` (Hunyuan).
    - ``yarn``: with the ramp r_i = clip((i − low) / (high − low), 0, 1) over
      :func:`yarn_correction_range`, θ_i · (1 − r_i) + (θ_i / factor) · r_i:
      pairs below ``low`` keep θ_i, pairs above ``high`` are divided by factor
      (Peng et al. 2023, "NTK-by-parts"). The ramp is computed on the original length.
      Attention factor: explicit ``attention_factor``, else
      :func:`yarn_attention_factor`.
    - ``longrope``: θ_i / ext_i with ext = ``long_factor`` if seq_len >
      original_max_position_embeddings else ``short_factor``; attention factor
      ``long_mscale`` / ``short_mscale`` on the same switch when given (PhiMoE,
      transformers' ``PhimoeRotaryEmbedding``), else explicit, else
      :func:`longrope_attention_factor`.
    - ``llama3``: with wavelength λ_i = 2π/θ_i and L = original length:
      λ_i < L/high_freq_factor keeps θ_i; λ_i > L/low_freq_factor gives
      θ_i/factor; in between (both bounds included) s = (L/λ_i − low_freq_factor)
      / (high_freq_factor − low_freq_factor) and (1 − s)·θ_i/factor + s·θ_i.
      With low_freq_factor = high_freq_factor (Llama 4) there is no band: a hard
      cut at λ = L/low_freq_factor (a pair exactly on it, where transformers
      divides 0 by 0, keeps θ_i).
    - ``proportional``: with D = rotary_dim (the head width) and p =
      ``partial_rotary_factor``, the first int(p·D // 2) pairs have
      rope_theta^(−2i/D) (the exponent keeps the full width D), the others 0;
      everything divided by ``factor`` (Barbero et al. 2025, "Round and round
      we go", p-RoPE; transformers ``_compute_proportional_rope_parameters``).
    """
    if isinstance(rotary_dim, bool) or not isinstance(rotary_dim, numbers.Integral) or rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(f"rotary_dim must be an even integer >= 2, got {rotary_dim!r}")
    rope_theta = check(rope_theta, ROPE_THETA, "rope_theta")
    p = check_rope_scaling(rope_type, **scaling)
    d = int(rotary_dim)
    inv_freq = rope_inv_freq(d, rope_theta)
    if rope_type == "linear":
        inv_freq = inv_freq / p["factor"]
    elif rope_type == "dynamic":
        if "alpha" in p:
            base = ntk_alpha_rope_theta(rope_theta, d, p["alpha"])
        else:
            base = dynamic_rope_theta(rope_theta, d, p["factor"], p["max_position_embeddings"], seq_len)
        inv_freq = rope_inv_freq(d, base)
    elif rope_type == "yarn":
        factor = p["factor"]
        low, high = yarn_correction_range(d, rope_theta, p["original_max_position_embeddings"],
                                          *(p.get(k, DEFAULTS[k]) for k in ("beta_fast", "beta_slow", "truncate")))
        if low == high:
            high += 0.001  # as transformers: avoid a zero-width ramp
        ramp = np.clip((np.arange(d // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
        inv_freq = inv_freq * (1.0 - ramp) + (inv_freq / factor) * ramp
    elif rope_type == "longrope":
        key = "long_factor" if _is_long(p, seq_len) else "short_factor"
        ext = np.asarray(p[key], dtype=np.float64)
        if ext.shape != (d // 2,):
            raise ValueError(f"longrope {key} has {ext.size} values, expected rotary_dim / 2 = {d // 2}")
        inv_freq = inv_freq / ext
    elif rope_type == "llama3":
        factor, low, high = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
        original = p["original_max_position_embeddings"]
        wavelength = 2 * np.pi / inv_freq
        scaled = np.where(wavelength > original / low, inv_freq / factor, inv_freq)
        if high > low:
            smooth = (original / wavelength - low) / (high - low)
            medium = (wavelength >= original / high) & (wavelength <= original / low)
            inv_freq = np.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled)
        else:
            inv_freq = scaled
    elif rope_type == "proportional":
        rotated = int(p.get("partial_rotary_factor", 1.0) * d // 2)
        inv_freq = np.where(np.arange(d // 2) < rotated, inv_freq, 0.0) / p.get("factor", 1.0)
    return inv_freq, _attention_factor(rope_type, p, seq_len)


def _is_long(p: dict, seq_len: int | None) -> bool:
    return seq_len is not None and seq_len > p["original_max_position_embeddings"]


def rope_attention_factor(rope_type: str = "default", *, seq_len: int | None = None, **scaling) -> float:
    """The attention factor of :func:`rope_parameters` alone (it does not depend on rotary_dim).

    ``short_mscale`` / ``long_mscale`` win (longrope, chosen by ``seq_len`` as the
    factor lists are); then an explicit ``attention_factor``; else
    :func:`yarn_attention_factor` for yarn, :func:`longrope_attention_factor` for
    longrope, 1.0 for the others.

    Raises
    ------
    ValueError
        As :func:`check_rope_scaling`.
    """
    return _attention_factor(rope_type, check_rope_scaling(rope_type, **scaling), seq_len)


def _attention_factor(rope_type: str, p: dict, seq_len: int | None) -> float:
    if rope_type == "longrope" and "long_mscale" in p:
        return float(p["long_mscale"] if _is_long(p, seq_len) else p["short_mscale"])
    if p.get("attention_factor") is not None:
        return float(p["attention_factor"])
    if rope_type == "yarn":
        return yarn_attention_factor(p["factor"], p.get("mscale"), p.get("mscale_all_dim"))
    if rope_type == "longrope":
        return longrope_attention_factor(p["factor"], p["original_max_position_embeddings"])
    return 1.0
