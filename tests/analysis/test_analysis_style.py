"""Figure details a reader would object to: error bars past 100 % accuracy, a legend over the points."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402

from vitscale.analysis.figures.canvas import axes  # noqa: E402
from vitscale.analysis.figures.style import bounded, legend  # noqa: E402


def test_error_bars_stop_at_the_quantitys_range() -> None:
    bars = bounded(np.array([90.0, 50.0, 2.0]), np.array([20.0, 20.0, 5.0]), 0.0, 100.0)
    assert bars.tolist() == [[20.0, 20.0, 2.0], [10.0, 20.0, 5.0]]  # (below, above) per point


def test_many_series_put_the_legend_beside_the_axes() -> None:
    fig, ax = plt.subplots()
    for i in range(18):
        ax.plot([0, 1], [i, i], label=f"s{i}")
    legend(ax)
    fig.canvas.draw()
    box, axes_box = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert box.x0 >= axes_box.x1  # right of the plot area, covering no point
    plt.close(fig)


@pytest.mark.parametrize(
    ("lo", "hi"), [(1.1e6, 1.9e6), (3.05e5, 3.4e5), (2e4, 9e4), (7.5e5, 1.94e6), (1e5, 2.5e6), (1e3, 2e7)]
)
def test_a_log_axis_labels_at_least_three_ticks_whatever_its_span(lo: float, hi: float) -> None:
    """A parameter axis spanning less than a decade showed one label ('1M'), or left 1M-1.9M bare."""
    fig, ax = axes("t", "params", "top-1", logx=True)
    ax.plot([lo, hi], [1, 2])
    ax.set_xlim(lo, hi)
    FigureCanvasAgg(fig).draw()
    shown = [t for t in ax.get_xticklabels() if lo <= t.get_position()[0] <= hi and t.get_text()]
    assert len({t.get_text() for t in shown}) >= 3, [t.get_text() for t in shown]
    # ... and they cover the axis: no bare stretch over half of it (in log space)
    marks = np.log10([lo, *sorted(t.get_position()[0] for t in shown), hi])
    assert np.diff(marks).max() <= 0.5 * (marks[-1] - marks[0]), [t.get_text() for t in shown]
