"""Positional encoding generators and their registry.

Built-in kinds: ``sinusoidal``, ``learned``, ``random``, ``rotary``, ``smoothed_random``; on grids
``mrope``, ``axial_rope``, ``sincos2d``; relative biases and score kernels (no table) ``alibi``, ``kerple``,
``t5_buckets``, ``xpos``, ``fire``.
Third-party kinds register through the entry-point group ``poslab.encodings``.
"""

from .base import Encoding, ParameterError, TableCost
from .registry import (
    ENTRY_POINT_GROUP,
    available_encodings,
    get_encoding_class,
    make_encoding,
    register,
    unregister,
)
from .sinusoidal import Sinusoidal, sinusoidal_frequencies  # noqa: E402  (registers)
from .learned import Learned  # noqa: E402
from .random import RandomEncoding  # noqa: E402
from .rotary import Rotary, apply_rotary, rope_angles, rope_inv_freq  # noqa: E402
from .smoothed_random import SmoothedRandom  # noqa: E402
from .axial import AxialRope  # noqa: E402
from .mrope import MRope  # noqa: E402
from .sincos2d import Sincos2D  # noqa: E402
from .kernel import Kernel, cosine_kernel  # noqa: E402
from .alibi import Alibi, alibi_slopes  # noqa: E402
from .kerple import Kerple  # noqa: E402
from .t5_buckets import T5Buckets  # noqa: E402
from .xpos import XPos  # noqa: E402
from .fire import Fire  # noqa: E402

__all__ = [
    "Alibi",
    "ENTRY_POINT_GROUP",
    "AxialRope",
    "Encoding",
    "Kernel",
    "Kerple",
    "Learned",
    "MRope",
    "ParameterError",
    "RandomEncoding",
    "Rotary",
    "Sincos2D",
    "Sinusoidal",
    "SmoothedRandom",
    "T5Buckets",
    "XPos",
    "Fire",
    "TableCost",
    "alibi_slopes",
    "apply_rotary",
    "available_encodings",
    "cosine_kernel",
    "get_encoding_class",
    "make_encoding",
    "register",
    "rope_angles",
    "rope_inv_freq",
    "sinusoidal_frequencies",
    "unregister",
]
