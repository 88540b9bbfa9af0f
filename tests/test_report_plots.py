"""Plot helpers: the drawn data (read back from the matplotlib axes before saving), log
scales, the zero-error marker, panel layout, and input validation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.colors as mcolors
import numpy as np
import pandas as pd
import pytest

from collapselab.report import plots
from collapselab.report.figures import plot_training_curves
from collapselab.report.plots import (
    plot_comparison,
    plot_metric,
    plot_panels,
    plot_vs_depth,
    relative_positions,
    select_curves,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _long(layers: int = 3, epochs: int = 5) -> pd.DataFrame:
    rows = []
    for epoch in range(epochs):
        for layer in range(layers):
            for metric, value in (("nc1", 10.0 ** (-epoch * (layer + 1) / 4)), ("acc", 0.5)):
                rows.append((epoch * 10, epoch, "train", f"layer{layer}", metric, value))
        rows.append((epoch * 10, epoch, "test", "layer0", "nc1", 2.0))
    rows.append((99, -1, "train", "layer0", "nc1", 123.0))  # not tied to an epoch
    return pd.DataFrame(rows, columns=["step", "epoch", "split", "layer", "metric", "value"])


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What each saved figure showed: per axes, the scales, title and lines."""
    figures: list[dict[str, Any]] = []
    original = plots._save

    def spy(fig: Any, path: Any, dpi: int = 120) -> Path:
        axes = []
        for ax in fig.axes:
            if not ax.get_visible():
                continue
            lines = [
                {
                    "label": line.get_label(),
                    "x": np.asarray(line.get_xdata(), dtype=float),
                    "y": np.asarray(line.get_ydata(), dtype=float),
                    "style": line.get_linestyle(),
                    "color": mcolors.to_hex(line.get_color()),
                }
                for line in ax.get_lines()
            ]
            bars = [p.get_height() for p in ax.patches]
            axes.append(
                {
                    "xscale": ax.get_xscale(),
                    "yscale": ax.get_yscale(),
                    "title": ax.get_title(),
                    "lines": lines,
                    "bars": bars,
                }
            )
        figures.append({"axes": axes})
        return original(fig, path, dpi)

    monkeypatch.setattr(plots, "_save", spy)
    return figures


def _line(ax: dict[str, Any], label: str) -> dict[str, Any]:
    return next(line for line in ax["lines"] if line["label"] == label)


def test_select_curves_filters_orders_and_drops_no_epoch_rows() -> None:
    curves = select_curves(_long(), metric="nc1", split="train")
    assert list(curves) == ["layer0", "layer1", "layer2"]
    x, y = curves["layer1"]
    assert x.tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(y, 10.0 ** (-np.arange(5) * 2 / 4), rtol=1e-15)
    both = select_curves(_long(), metric="nc1", layer="layer0")  # two splits: labelled
    assert list(both) == ["layer0 train", "layer0 test"]
    with pytest.raises(ValueError, match="no rows to plot for metric='nope'"):
        select_curves(_long(), metric="nope")
    with pytest.raises(ValueError, match="lacks columns"):
        select_curves(pd.DataFrame({"epoch": [1]}), metric="nc1")


def test_plot_metric_log_axes_and_zero_error_marker(
    tmp_path: Path, drawn: list[dict[str, Any]]
) -> None:
    path = plot_metric(
        _long(),
        tmp_path / "nc1.png",
        "nc1",
        split="train",
        logx=True,
        logy=True,
        zero_error_epoch=2,
    )
    assert path.read_bytes()[:8] == PNG_MAGIC
    (ax,) = drawn[0]["axes"]
    assert (ax["xscale"], ax["yscale"]) == ("log", "log")
    layer0 = _line(ax, "layer0")
    assert layer0["x"].tolist() == [1, 2, 3, 4]  # epoch 0 cannot sit on a log-x axis
    np.testing.assert_allclose(layer0["y"], 10.0 ** (-np.arange(1, 5) / 4), rtol=1e-15)
    marker = _line(ax, "zero training error")
    assert marker["x"].tolist() == [2, 2]
    assert (marker["style"], marker["color"]) == (":", "#ff0000")


def test_plot_metric_plain_arrays_and_non_positive_on_log_y(
    tmp_path: Path, drawn: list[dict[str, Any]]
) -> None:
    plot_metric({"a": ([0, 1, 2], [1.0, 0.0, -1.0])}, tmp_path / "a.png", logy=True)
    y = _line(drawn[0]["axes"][0], "a")["y"]
    assert y[0] == 1.0 and np.isnan(y[1:]).all()  # gaps, not clipped values
    with pytest.raises(ValueError, match="curve 'b'"):
        plot_metric({"b": ([0, 1], [1.0])}, tmp_path / "b.png")
    with pytest.raises(ValueError, match=r"\.png"):
        plot_metric({"a": ([0], [1])}, tmp_path / "a.svg")


def test_plot_panels_one_per_value_with_per_panel_options(
    tmp_path: Path, drawn: list[dict[str, Any]]
) -> None:
    frames = []
    for dataset, scale in (("MNIST", 1.0), ("CIFAR10", 3.0)):
        frame = _long()
        frame["value"] *= scale
        frame["dataset"] = dataset
        frames.append(frame[frame["split"] == "train"])
    data = pd.concat(frames, ignore_index=True)
    plot_panels(
        data,
        tmp_path / "grid.png",
        panel="dataset",
        metric="nc1",
        logy={"CIFAR10": True},
        zero_error_epoch={"MNIST": 1, "CIFAR10": 3},
        ncols=1,
    )
    mnist, cifar = drawn[0]["axes"]
    assert (mnist["title"], cifar["title"]) == ("MNIST", "CIFAR10")
    assert (mnist["yscale"], cifar["yscale"]) == ("linear", "log")
    assert _line(mnist, "zero training error")["x"].tolist() == [1, 1]
    assert _line(cifar, "zero training error")["x"].tolist() == [3, 3]
    np.testing.assert_allclose(_line(cifar, "layer0")["y"], 3.0 * 10.0 ** (-np.arange(5) / 4))
    plot_panels(_long(), tmp_path / "metrics.png", panel="metric", split="train", ncols=3)
    assert [ax["title"] for ax in drawn[1]["axes"]] == ["nc1", "acc"]
    with pytest.raises(ValueError, match="no rows for panels"):
        plot_panels(data, tmp_path / "x.png", panel="dataset", panels=["SVHN"])


def test_plot_vs_depth_positions_and_prediction(
    tmp_path: Path, drawn: list[dict[str, Any]]
) -> None:
    t = np.linspace(0.0, 1.0, 11)
    plot_vs_depth(
        _long(),
        tmp_path / "depth.png",
        ["nc1", "acc"],
        prediction={"nc1": (t, 1.0 - t)},
        positions={"layer0": 0.0, "layer1": 0.7, "layer2": 1.0},
    )
    nc1, acc = drawn[0]["axes"]
    layers = _line(nc1, "layers")
    assert layers["x"].tolist() == [0.0, 0.7, 1.0]
    np.testing.assert_allclose(layers["y"], 10.0 ** (-4 * np.arange(1, 4) / 4))  # last epoch
    np.testing.assert_allclose(_line(nc1, "prediction")["y"], 1.0 - t)
    assert [line["label"] for line in acc["lines"]] == ["layers"]
    np.testing.assert_allclose(relative_positions(3), [0.0, 0.5, 1.0])
    plot_vs_depth(_long(), tmp_path / "d2.png", "nc1", epoch=0)
    np.testing.assert_allclose(_line(drawn[1]["axes"][0], "layers")["y"], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="positions has 2 values for 3 layers"):
        plot_vs_depth(_long(), tmp_path / "d3.png", "nc1", positions=[0.0, 1.0])


def test_plot_comparison_bars_reference_and_log(
    tmp_path: Path, drawn: list[dict[str, Any]]
) -> None:
    plot_comparison(
        {"PFC1": {"UFM": 1e-9, "MUFM": 0.3}, "PFC2": {"UFM": 1e-8, "MUFM": 0.5}},
        tmp_path / "cmp.png",
        reference={"PFC1": 0.8, "PFC2": 0.9},
        reference_label="data X",
        logy=True,
    )
    first, second = drawn[0]["axes"]
    assert first["bars"] == pytest.approx([1e-9, 0.3])
    assert first["yscale"] == "log"
    assert _line(second, "data X")["y"].tolist() == [0.9, 0.9]
    plot_comparison({"a": 1.0, "b": 2.0}, tmp_path / "pts.png", kind="point")
    assert drawn[1]["axes"][0]["lines"][0]["y"].tolist() == [1.0, 2.0]
    with pytest.raises(ValueError, match="kind"):
        plot_comparison({"a": 1.0}, tmp_path / "x.png", kind="pie")


def test_plot_training_curves_still_works(tmp_path: Path) -> None:
    rows = [
        (e, e, split, "", metric, value)
        for e in range(3)
        for split in ("train", "test")
        for metric, value in (("loss", 1.0 / (e + 1)), ("accuracy", 0.3 * e))
    ]
    frame = pd.DataFrame(rows, columns=["step", "epoch", "split", "layer", "metric", "value"])
    path = plot_training_curves(frame, tmp_path / "t.png", zero_error_epoch=2)
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_layout_fits_the_report_and_legends_stay_off_the_axes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every figure is at most MAX_FIGURE_WIDTH wide with at most 3 panels per row, and no
    legend overlaps the data area of any panel."""
    checked: list[tuple[float, int]] = []
    original = plots._save

    def spy(fig: Any, path: Any, dpi: int = plots.DPI) -> Path:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
        boxes = [ax.get_window_extent(renderer) for ax in fig.axes if ax.get_visible()]
        for legend in legends:
            box = legend.get_window_extent(renderer)
            assert not any(box.overlaps(other) for other in boxes), path
        columns = {round(ax.get_position().x0, 3) for ax in fig.axes if ax.get_visible()}
        assert len(columns) <= plots.MAX_PANELS_PER_ROW
        checked.append((fig.get_figwidth(), len(legends)))
        return original(fig, path, dpi)

    monkeypatch.setattr(plots, "_save", spy)
    frame = _long(layers=9)
    frame = pd.concat(
        [frame, frame.assign(metric="m3"), frame.assign(metric="m4"), frame.assign(metric="m5")]
    )
    plot_panels(frame, tmp_path / "a.png", panel="metric", logy=True, zero_error_epoch=2)
    plot_metric(frame, tmp_path / "b.png", "nc1", split="train")
    plot_vs_depth(
        frame, tmp_path / "c.png", ["nc1", "acc", "m3", "m4"], prediction=([0, 1], [1, 0])
    )
    values = {f"panel {k}": {f"item {i}": i + 1.0 for i in range(6)} for k in range(4)}
    plot_comparison(values, tmp_path / "d.png", reference=0.5)
    # a: the nc1 panel also shows the test split, so each panel has its own legend (outside);
    # the others share one legend below their panels.
    assert [n for _, n in checked] == [5, 1, 1, 1]
    assert all(width <= plots.MAX_FIGURE_WIDTH + 1e-9 for width, _ in checked)
    for name in "abcd":
        width = int.from_bytes((tmp_path / f"{name}.png").read_bytes()[16:20], "big")
        assert width <= plots.MAX_FIGURE_WIDTH * plots.DPI + 1


def test_the_text_of_a_wide_figure_is_enlarged_for_narrow_screens(tmp_path) -> None:
    import matplotlib.pyplot as plt

    from collapselab.report.plots import MAX_FIGURE_WIDTH, readable_text

    def ticks(width: float) -> float:
        fig, ax = plt.subplots(figsize=(width, 3.0))
        ax.plot([0, 1], [0, 1])
        before = ax.xaxis.get_ticklabels()[0].get_fontsize()
        readable_text(fig)
        after = ax.xaxis.get_ticklabels()[0].get_fontsize()
        plt.close(fig)
        return after / before

    assert ticks(4.0) == 1.0 and ticks(MAX_FIGURE_WIDTH / 2) == 1.0
    assert abs(ticks(MAX_FIGURE_WIDTH) - 1.3) < 1e-12
    assert abs(ticks(0.75 * MAX_FIGURE_WIDTH) - 1.15) < 1e-12
