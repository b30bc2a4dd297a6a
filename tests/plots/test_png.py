"""save_figure's PNG writer (poslab.plots.core._PngCanvas): the pixels, size and metadata matplotlib's own PNG
(written through PIL) has, whatever the figure holds."""

import io

import matplotlib
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image

from poslab.plots import save_figure
from poslab.plots.core import _PngCanvas, _png_bytes


def _figure():
    fig = Figure(figsize=(3.1, 1.7), layout="constrained")
    ax_line, ax_image = fig.subplots(1, 2)
    x = np.linspace(1, 1e4, 500)
    ax_line.plot(x, np.cos(x / 300) / np.sqrt(x), lw=0.8, alpha=0.7)
    ax_line.fill_between(x, -0.1, 0.1, alpha=0.3)
    ax_line.set_xscale("log")
    ax_line.set_title("a title, ÿ and μ")
    ax_image.imshow(np.random.default_rng(0).normal(size=(9, 13)), cmap="coolwarm")
    fig.patch.set_alpha(0.4)  # translucent pixels too
    return fig


@pytest.mark.parametrize("dpi", [72, 150, 300])
def test_save_figure_writes_the_pixels_and_metadata_of_matplotlibs_png(dpi, tmp_path):
    fig = _figure()
    save_figure(fig, tmp_path / "ours.png", dpi=dpi, close=False)  # laid out there, once
    assert isinstance(fig.canvas, _PngCanvas)
    FigureCanvasAgg(fig)
    fig.savefig(tmp_path / "theirs.png", dpi=dpi)  # matplotlib's print_png, through PIL, at the same layout
    with Image.open(tmp_path / "ours.png") as a, Image.open(tmp_path / "theirs.png") as b:
        a.load()
        b.load()
        assert (a.mode, a.size, a.info) == (b.mode, b.size, b.info)
        assert np.array_equal(np.asarray(a), np.asarray(b))


def test_png_bytes_round_trip_every_byte_value():
    rgba = np.random.default_rng(1).integers(0, 256, size=(7, 5, 4), dtype=np.uint8)  # "up" wraps modulo 256
    with Image.open(io.BytesIO(_png_bytes(rgba, 300, {"Software": "x"}))) as image:
        assert image.mode == "RGBA" and image.info["Software"] == "x"
        assert np.array_equal(np.asarray(image), rgba)


def test_a_pyplot_figure_keeps_its_canvas(tmp_path):
    pyplot = pytest.importorskip("matplotlib.pyplot")
    with matplotlib.rc_context({"backend": "agg"}):
        fig = pyplot.figure()
        canvas = fig.canvas
        save_figure(fig, tmp_path / "f.png", close=False)
        assert fig.canvas is canvas  # its window's canvas: written through matplotlib's own PNG writer
        pyplot.close(fig)
    assert (tmp_path / "f.png").stat().st_size > 0
