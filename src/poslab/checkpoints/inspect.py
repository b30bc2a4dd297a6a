"""``poslab inspect``: what poslab finds in a source, and which table it would analyse (or why none)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..data import BUNDLED_GRIDS, BUNDLED_RUNS, BUNDLED_TABLES, bundled_name, bundled_path
from .files import list_tensors
from .positions import describe_selection, select_position_table
from .runs import is_training_run, open_training_run
from .sources import looks_like_path, parse_hub_id

__all__ = ["inspect_source", "NoTableError"]


class NoTableError(ValueError):
    """No position table would be used; ``report`` is the full inspection, ``reason`` says why."""

    def __init__(self, report: str, reason: str):
        super().__init__(reason)
        self.report, self.reason = report, reason


def _bundled(name: str) -> str:
    path = bundled_path(name)
    info = list_tensors(path)[0]
    grid = BUNDLED_GRIDS.get(name)
    lines = [f"{name}: bundled table {path.name} {info.shape} {info.dtype} — {BUNDLED_TABLES[name][1]}"]
    if grid:
        lines.append(f"used: the whole table, offset 0, grid {grid[0]}x{grid[1]} (patches in raster order), "
                     "prefix tokens 0 — rule: bundled table (provenance in poslab/data/PROVENANCE.md)")
    else:
        lines.append("used: the whole table, position p = row p (offset 0) — rule: bundled table "
                     "(provenance in poslab/data/PROVENANCE.md)")
    if name in BUNDLED_RUNS:
        lines.append(f'(also a training run: step = N or step = "all" analyses its saved steps)')
    return "\n".join(lines)


def inspect_source(source, key: str | None = None) -> str:
    """Describe the candidate position tensors of ``source`` and the one poslab would use.

    Parameters
    ----------
    source : str or Path
        Anything ``learned`` accepts as ``source``: a bundled name (``gpt2``, ``bundled:gpt2``), a weights
        file or ``config.json``, a model folder, a cache snapshot or
        ``models--ORG--NAME`` folder, a Hub id, or a training-run folder.
    key : str, optional
        Check this tensor instead of choosing automatically.

    Returns
    -------
    str
        One line per candidate (name, shape, dtype, offset, grid, prefix
        tokens, role) and a final ``used: ...`` line saying which and by
        which rule.

    Raises
    ------
    NoTableError
        Nothing would be used (ambiguous, refused, none found); carries the
        report and the reason.
    FileNotFoundError, KeyError, ValueError, ImportError
        A bare bundled name that is also a path here (ambiguous), or the source cannot be read (see :func:`poslab.checkpoints.select_position_table`).
    """
    text = str(source)
    name = bundled_name(text)  # the one rule learned follows: a bare bundled name that is also a path is refused
    if name is not None:
        if key is not None:
            raise ValueError(f"bundled table {name!r} holds one tensor; remove --key")
        return _bundled(name) + _learned_check(text, key)
    if Path(text).exists() and is_training_run(text):
        run = open_training_run(text)
        lines = [f"{Path(text)}: poslab training run, {len(run.steps)} saved step(s)"]
        for step in run.steps:
            file = run.path / "positions" / f"step_{step:07d}.npy"
            lines.append(f"  step {step}: {file.relative_to(run.path)}" + ("" if file.is_file() else "  MISSING"))
        lines.append('used: the table of the step given as step = N (or step = "all" in a study file: every step)')
        return "\n".join(lines)
    if not Path(text).expanduser().exists() and not looks_like_path(text) and parse_hub_id(text) is None:
        raise FileNotFoundError(f"{text!r} is neither a bundled table ({', '.join(BUNDLED_TABLES)}) nor an existing "
                                "file or folder nor a Hub id ORG/NAME[@REVISION]; give one of these")
    try:
        selection = select_position_table(text, key)
    except (OSError, KeyError, ValueError) as exc:
        rotary, readable = _rotary_reading(text)
        if rotary is None:
            raise
        return _no_table(rotary, readable, text, exc.args[0] if isinstance(exc, KeyError) else str(exc))
    report = describe_selection(selection)
    if selection.chosen is None:
        rotary, readable = _rotary_reading(text)
        return _no_table(report + (f"\n{rotary}" if rotary else ""), readable, text, selection.reason)
    return report + _provenance(selection.checkpoint.model) + _learned_check(text, key)


def _no_table(report: str, readable: bool | str, text: str, reason: str) -> str:
    """No learned table: the report with how ``rotary config =`` reads the config, or :class:`NoTableError`.

    A config that ``rotary config = text`` reads is an answer, not a failure: its positions are RoPE, and
    the report says so and what to write (``kind = "mrope"`` for a config with an M-RoPE section: its
    image and video positions are on a t × h × w grid). A config whose RoPE cannot be read is refused
    with the rotary entry's own reason in the report (what it found, what to write; no inventory of
    default values it would not use) and why there is no learned table; anything else would be refused
    by every study (exit 2).
    """
    if readable == "mrope":
        return (f"{report}\nused: no learned position table: the model's positions are M-RoPE, read as above; "
                f"analyse them with kind = \"mrope\", config = {text!r} (grid = \"TxHxW\" for image or video "
                f"positions; none: text tokens), or as 1-D RoPE with kind = \"rotary\", config = {text!r} "
                "(text tokens only)")
    if not readable:
        if report.startswith(_REFUSED):  # the config's RoPE refused (the report says why and what to write)
            raise NoTableError(report, f"{reason}; nor RoPE from its config (refused above, with what to write)")
        raise NoTableError(report, reason)
    return (f"{report}\nused: no learned position table: the model's positions are RoPE, read as above; "
            f"analyse them with kind = \"rotary\", config = {text!r}")


_REFUSED = "as rotary config = "


def _provenance(model) -> str:
    """The Hub repo and snapshot commit read (the summary's source_repo / source_revision), if any."""
    if model.repo_id is None:
        return ""
    asked = model.requested_revision
    how = f" (refs/{asked})" if asked and asked != model.revision else ""
    return f"\nHub repo {model.repo_id}, revision {model.revision}{how}"


def _learned_check(text: str, key: str | None) -> str:
    """The table's fingerprint, after the checks a study's parse runs on ``learned source = text``.

    One code path with the study: the ``learned`` encoding is built and sized like any study entry
    (n_positions = 1 is the smallest window, a vision table's whole grid the only one it takes, so whatever
    it refuses, every study refuses).

    Raises
    ------
    NoTableError
        A study would refuse this source; the reason is the study's own message.
    """
    from ..encodings.learned import Learned

    try:
        enc = Learned(source=text, key=key)
        grid = enc.grid_shape(1)
        enc.check_size(1 if grid is None else int(np.prod(grid)), 1)
    except (OSError, KeyError, ValueError) as exc:
        raise NoTableError(_report_so_far(text, key), exc.args[0] if isinstance(exc, KeyError) else str(exc)) from None
    return f"\ntable sha256 {enc.stored().sha256}"


def _report_so_far(text: str, key: str | None) -> str:
    """The report without the study's checks (for a refusal found by them)."""
    if bundled_name(text) is not None:
        return _bundled(bundled_name(text))
    selection = select_position_table(text, key)
    return describe_selection(selection) + _provenance(selection.checkpoint.model)


def _rotary_reading(text: str) -> tuple[str | None, bool | str]:
    """How ``rotary config = text`` reads the source's config.json (or refuses it), and whether it reads it
    (``"mrope"``: it does, and the config has an M-RoPE section).

    ``(None, False)`` without a config.json. A config with several RoPEs reads when the entry names a
    layer type (the inventory says which).

    The rotary encoding's own parse check, as a study entry runs it, then the per-layer inventory
    (:func:`poslab.encodings.model_config.read_rope_inventory`): every layer type, how many layers of
    each and which, the RoPE of each, and the layers without RoPE with their query temperature.
    """
    from ..encodings.model_config import config_path, read_rope_inventory
    from ..encodings.rotary import Rotary

    try:
        config_path(text)
    except ValueError:
        return None, False
    try:
        inv = read_rope_inventory(text)
    except ValueError as exc:
        return f"as rotary config = {text!r}: refused: rotary: config: {exc}", False
    try:
        cfg = Rotary(config=text).read_config()
    except ValueError as exc:  # several RoPEs: the entry must name a layer type (said below)
        if len(inv.layer_types) < 2:  # refused: no inventory, whose values would be the defaults it refuses
            return f"as rotary config = {text!r}: refused: {exc}", False
        return describe_inventory(inv, text), True
    width = f"head_dim {cfg.head_dim}" if cfg.head_dim is not None else "head width: the study's dim"
    section = "" if cfg.mrope_section is None else \
        f", mrope_section {','.join(map(str, cfg.mrope_section))} (M-RoPE: t, h, w axes)"
    lines = [f"as rotary config = {text!r}: rope_type {cfg.rope_type!r}, rope_theta {cfg.rope_theta:g}, {width}"
             + section, describe_inventory(inv, text)]
    return "\n".join(lines), "mrope" if cfg.mrope_section is not None else True


def _ranges(layers) -> str:
    """Layer indices as compact ranges: 0-4, 6-10, 12."""
    out, start = [], None
    for i, layer in enumerate(layers):
        if start is None:
            start = layer
        if i + 1 == len(layers) or layers[i + 1] != layer + 1:
            out.append(str(start) if start == layer else f"{start}-{layer}")
            start = None
    return ", ".join(out)


def describe_inventory(inv, text: str) -> str:
    """The per-layer RoPE inventory of a config as ``poslab inspect`` prints it."""
    where = f"{inv.model_type or 'no model_type'}" + (f", {inv.part}" if inv.part else "")
    n = inv.num_hidden_layers
    head = f"layers of {text!r} ({where}): " + (f"{n} layers" if n is not None else "number not given")
    lines = [head + (f", {len(inv.groups)} layer types" if len(inv.groups) > 1 else "")]
    for g in inv.groups:
        name = "every layer" if g.layer_type is None else g.name
        layers = f"{g.count} layers [{_ranges(g.layers)}]" if g.layers else "layers not listed"
        if g.attention_window is not None:
            layers += f" ({g.attention_window[0]} {g.attention_window[1]})"
        if g.rope is not None:
            lines.append(f"  {name}: {layers}: {g.rope.describe()}")
            continue
        text_ = f"  {name}: {layers}: no RoPE, no positional geometry ({g.no_rope})"
        if g.temperature is not None:
            t = g.temperature
            at = t.scale([t.floor_scale - 1, 2**20 - 1])
            text_ += (f"; query temperature 1 + {t.attn_scale:g}·ln(⌊(p+1)/{t.floor_scale}⌋ + 1): {at[0]:.5f} from "
                      f"p+1 = {t.floor_scale}, {at[1]:.5f} at p+1 = 2^20 (table nope_temperature)")
        lines.append(text_)
    if len(inv.layer_types) > 1:
        distinct = [g for i, g in enumerate(inv.groups) if g.rope is not None
                    and not any(h.rope is not None and g.rope.same_rope(h.rope) for h in inv.groups[:i])]
        if len(distinct) > 1:
            lines.append("  a rotary entry names one: layer_type = " + " | ".join(f'"{g.name}"' for g in distinct)
                         + ' (a list, or "all": one run each)')
    for key, source in inv.sources.items():
        if key in ("layer_types", "no_rope_layers", "layer_types period", "no_rope_layers period") \
                or key.startswith("nope."):
            lines.append(f"  {key}: {source}")
    return "\n".join(lines)
