"""A public conformance suite for encodings: does a class behave as poslab expects?

Modelled on scikit-learn's ``utils.estimator_checks.check_estimator``: one
call runs every generic check on an encoding class with example parameters,
and :func:`encoding_checks` yields the checks one by one so a test suite can
parametrize over them (one test per check, with its name)::

    from poslab.testing import check_encoding

    def test_my_encoding():
        check_encoding(MyEncoding, {"length_scale": 8.0})

    # or, one pytest test per check:
    @pytest.mark.parametrize("check", encoding_checks(MyEncoding, {"length_scale": 8.0}), ids=str)
    def test_my_encoding(check):
        check()

A failing check raises AssertionError saying what was expected and what the
encoding did. The class need not be registered (``@register`` runs the same
class-level checks). The built-in kinds pass it (``tests/encodings/test_generic.py``),
and so does ``examples/random_fourier``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .encodings.base import Encoding

__all__ = ["check_encoding", "encoding_checks", "EncodingCheck"]


@dataclasses.dataclass(frozen=True)
class EncodingCheck:
    """One named check of one encoding; call it to run it (AssertionError on failure)."""

    name: str
    run: Callable[[], None]

    def __call__(self) -> None:
        self.run()

    def __str__(self) -> str:
        return self.name


def check_encoding(cls: type[Encoding], params: dict[str, Any] | None = None, *, n_positions: int = 33,
                   dim: int = 17, width: int | None = None) -> None:
    """Run every generic check on an encoding class with example parameters.

    Parameters
    ----------
    cls : type
        A frozen dataclass subclass of :class:`poslab.encodings.Encoding`.
    params : dict, optional
        Example hyperparameters (required ones included); default none.
    n_positions, dim : int
        The size generated (a small one keeps the checks fast; at least 4 positions).
    width : int, optional
        The expected table width for a kind that keeps its own width
        (``keeps_own_dim``); default ``dim``.

    Raises
    ------
    AssertionError
        The first check that fails, named, with what was expected and what happened.
    """
    for check in encoding_checks(cls, params, n_positions=n_positions, dim=dim, width=width):
        check()


def encoding_checks(cls: type[Encoding], params: dict[str, Any] | None = None, *, n_positions: int = 33,
                    dim: int = 17, width: int | None = None) -> Iterator[EncodingCheck]:
    """The checks of :func:`check_encoding`, one by one (for ``pytest.mark.parametrize``)."""
    params = dict(params or {})
    kind = getattr(cls, "kind", "") or getattr(cls, "__name__", "?")
    for name, check in _CHECKS:
        yield EncodingCheck(f"{kind}: {name}",
                            lambda check=check: check(cls, params, n_positions, dim, width))


def _build(cls, params):
    from .encodings.registry import build

    return build(cls, **params)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _fail(what: str) -> None:
    raise AssertionError(what)


def check_class(cls, params, n, dim, width):
    """A frozen dataclass subclass of Encoding with a kind, no parameter named like an output column."""
    from .encodings.registry import check_class as registry_check

    try:
        registry_check(cls)
    except (TypeError, ValueError) as exc:
        _fail(f"{cls!r} cannot be registered: {exc}")


def check_only_generates(cls, params, n, dim, width):
    """Encodings only generate: the old run_info / run_tables hooks are not read any more."""
    stale = [h for h in ("run_info", "run_tables") if any(h in vars(c) for c in cls.__mro__ if c is not object)]
    if stale:
        _fail(f"{cls.__name__} defines {', '.join(stale)}, which poslab no longer reads: what a study measures on "
              "a table is an analysis stage (README, 'Adding an analysis'); remove them")


def _check_kernel(enc, n, dim):
    """An encoding without a table: generate() refuses, kernel() gives a Kernel over 0..max_distance, reproducibly."""
    from .encodings.kernel import Kernel

    try:
        enc.generate(n, dim, rng=_rng())
    except ValueError:
        pass
    else:
        _fail(f"{enc.label} has generates_table = False but generate() returned a table")
    kernel = enc.kernel(n, n - 1, dim)
    if not isinstance(kernel, Kernel) or kernel.max_distance != n - 1:
        _fail(f"{enc.label}.kernel({n}, {n - 1}, {dim}) gave {kernel!r}, expected a Kernel over distances 0..{n - 1}")
    again = enc.kernel(n, n - 1, dim)
    if not (np.array_equal(kernel.backward, again.backward) and np.array_equal(kernel.forward, again.forward,
                                                                               equal_nan=True)):
        _fail(f"{enc.label}: two kernels of the same size differ: kernel() must depend on its parameters only")


def check_table(cls, params, n, dim, width):
    """generate() returns a finite float64 table of shape (n_positions, width); an encoding without a table
    (``generates_table = False``) refuses to generate and returns its kernel, reproducibly."""
    enc = _build(cls, params)
    if not enc.generates_table:
        return _check_kernel(enc, n, dim)
    table = enc.generate(n, dim, rng=_rng())
    expected = (n, width if width is not None else dim)
    if not isinstance(table, np.ndarray) or table.shape != expected:
        _fail(f"{enc.label}.generate({n}, {dim}) gave shape {getattr(table, 'shape', type(table))}, "
              f"expected {expected}")
    if table.dtype != np.float64 or not np.isfinite(table).all():
        _fail(f"{enc.label}.generate gave dtype {table.dtype} (finite: {np.isfinite(table).all()}); expected finite "
              "float64")


def check_reproducible_and_seeded(cls, params, n, dim, width):
    """The same generator seed gives the same table; another seed another one exactly when ``stochastic``."""
    enc = _build(cls, params)
    if not enc.generates_table:
        if enc.stochastic:
            _fail(f"{enc.label}: an encoding without a table has no random draw (kernel() takes no rng); "
                  "set stochastic = False")
        return
    a, b = enc.generate(n, dim, rng=_rng(7)), enc.generate(n, dim, rng=_rng(7))
    if not np.array_equal(a, b):
        _fail(f"{enc.label}: two tables from default_rng(7) differ: generate must depend on its parameters and "
              "rng only")
    differs = not np.array_equal(a, enc.generate(n, dim, rng=_rng(8)))
    if differs != enc.stochastic:
        _fail(f"{enc.label}: stochastic = {enc.stochastic}, but another seed gives "
              f"{'another' if differs else 'the same'} table; set stochastic = {differs}")
    if enc.stochastic:
        try:
            enc.generate(n, dim)
        except ValueError:
            return
        _fail(f"{enc.label} is stochastic but generated a table without rng")


def check_parameters(cls, params, n, dim, width):
    """Parameters round-trip through params(), the label is deterministic, the object is frozen."""
    enc = _build(cls, params)
    if not isinstance(enc, Encoding) or enc.kind != cls.kind:
        _fail(f"{cls.__name__}: built object is not an Encoding of kind {cls.kind!r}")
    if _build(cls, enc.params()) != enc:
        _fail(f"{enc.label}: building it again from params() gives another encoding")
    if enc.label != _build(cls, params).label or not enc.label.startswith(cls.kind):
        _fail(f"{enc.label}: the label must be deterministic and start with the kind {cls.kind!r}")
    for key, value in params.items():
        if enc.params()[key] != value:
            _fail(f"{enc.label}: params()[{key!r}] is {enc.params()[key]!r}, given {value!r}")
    try:
        setattr(enc, next(iter(enc.params()), "kind"), None)
    except dataclasses.FrozenInstanceError:
        return
    except AttributeError:
        return
    _fail(f"{enc.label}: parameters can be reassigned; decorate with @dataclasses.dataclass(frozen=True)")


def check_bad_sizes(cls, params, n, dim, width):
    """Sizes it cannot produce are refused with ValueError / TypeError, never a wrong table."""
    enc = _build(cls, params)
    for bad in [(0, dim), (n, 0), (2.5, dim)]:
        try:
            enc.generate(*bad, rng=_rng()) if enc.generates_table else enc.kernel(bad[0], 0, bad[1])
        except (ValueError, TypeError):
            continue
        _fail(f"{enc.label}.{'generate' if enc.generates_table else 'kernel'}{bad} did not refuse the size")


def check_parameter_messages(cls, params, n, dim, width):
    """An unknown parameter is refused listing the valid ones; a wrong type names the parameter."""
    try:
        _build(cls, {**params, "not_a_parameter": 1})
    except TypeError as exc:
        if "valid parameters" not in str(exc):
            _fail(f"{cls.kind}: an unknown parameter's message does not list the valid ones: {exc}")
    else:
        _fail(f"{cls.kind}: an unknown parameter was accepted")


def check_kernel(cls, params, n, dim, width):
    """A kernel (when there is one) holds distances 0..n − 1 on a known scale, and a cosine kernel equals the
    similarity profile of the encoding's own table (the fast path is exact: to 1e-10)."""
    from .analysis import similarity_profile
    from .encodings.kernel import Kernel

    enc = _build(cls, params)
    kernel = enc.kernel(n, n - 1, dim)
    if kernel is None:
        return
    if not isinstance(kernel, Kernel) or kernel.max_distance != n - 1:
        _fail(f"{enc.label}.kernel({n}, {n - 1}, {dim}) must be a poslab.encodings.kernel.Kernel up to distance "
              f"{n - 1}, got {kernel!r}")
    if enc.generates_table and kernel.scale == "cosine":
        table = enc.generate(n, dim, rng=_rng() if enc.stochastic else None)
        gap = np.nanmax(np.abs(similarity_profile(table).mean_similarity - kernel.profile()))
        if not gap <= 1e-10:
            _fail(f"{enc.label}: its cosine kernel differs from its table's similarity profile by {gap:.3g} (> 1e-10): "
                  "return None from _kernel unless the kernel is exact")


def check_analysable(cls, params, n, dim, width):
    """Every analysis stage that applies runs on a generated table and writes only declared columns."""
    from .stages import AnalysisOptions, RunContext, build_stages
    from .study.runner import _check_output

    enc = _build(cls, params)
    options = AnalysisOptions(n_resamples=40, heatmap_bins=min(8, n))
    ctx = RunContext(enc, n_positions=n, max_distance=n - 1, dim=dim, options=options,
                     seed=0 if enc.stochastic else None)
    stages = build_stages(options)
    for i, stage in enumerate(stages):
        ctx.pending = stages[i:]
        if stage.applies(ctx):
            try:
                _check_output(stage, stage.compute(ctx))
            except Exception as exc:  # noqa: BLE001 - reported as the check's failure
                what = f"its kernel ({n} positions)" if ctx.__dict__.get("kernel") is not None else \
                    f"a generated {n} x {ctx.table_dim} table"
                _fail(f"{enc.label}: stage {stage.name} failed on {what}: "
                      f"{type(exc).__name__}: {exc}")


_CHECKS = [(f.__name__.removeprefix("check_"), f) for f in (
    check_class, check_only_generates, check_table, check_reproducible_and_seeded, check_parameters,
    check_bad_sizes, check_parameter_messages, check_kernel, check_analysable)]
