import re

import matplotlib.image as mpimg
import pytest

from neurodyn.plots import plot_rollout_curves


def test_rollout_curves_png_has_the_figure_size(tmp_path):
    curves = {"model": [0.01, 0.02, 0.05], "persistence": [0.1, 0.2, 0.3]}
    path = plot_rollout_curves(curves, tmp_path / "sub" / "curves.png", "t", baselines=["persistence"], log=True)
    img = mpimg.imread(path)
    assert img.shape[:2] == (432, 660)  # 3.6 x 5.5 inches at 120 dpi
    assert img[..., :3].std() > 0.05  # something is drawn, not a blank canvas


def test_seed_mean_curves_cut_to_the_shortest_run_and_skip_empty_labels(tmp_path):
    from neurodyn.plots import plot_seed_mean_curves

    means = plot_seed_mean_curves(
        {"a": [[1.0, 2.0, 3.0], [3.0, 4.0]], "b": [], "c": [[0.5, 0.25]]}, tmp_path / "c.png", "loss", log=True
    )
    assert set(means) == {"a", "c"}
    assert means["a"].tolist() == [2.0, 3.0] and means["c"].tolist() == [0.5, 0.25]
    assert (tmp_path / "c.png").stat().st_size > 0


# ------------------------------------------------------------------------------------------ figures that explain


def _texts(path):
    """The title and the panels' titles / axis labels a PNG was written with (its text chunks)."""
    from PIL import Image

    with Image.open(path) as im:
        return im.text.get("Title", ""), im.text.get("Description", "")


def _captured(monkeypatch):
    """The figures plots.save_figure is given, kept open to read back."""
    from neurodyn import plots

    figs = []
    real = plots.save_figure

    def keep(fig, path, *args, **kwargs):
        figs.append(fig)
        texts = plots.figure_texts(fig)
        out = real(fig, path, *args, **kwargs)
        figs[-1] = (fig, texts)
        return out

    monkeypatch.setattr(plots, "save_figure", keep)
    return figs


def test_prediction_panels_name_the_fields_and_the_title_is_not_a_panel(tmp_path, monkeypatch):
    import torch

    from neurodyn.plots import plot_predictions

    figs = _captured(monkeypatch)
    x, y = torch.rand(2, 8, 8, 1), torch.rand(2, 8, 8, 1)
    path = plot_predictions(
        x,
        y,
        y + 0.1,
        tmp_path / "p.png",
        title="fno (fno/darcy), run r: test split of d.h5",
        source="a (permeability)",
        target="u (solution)",
    )
    fig, texts = figs[0]
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titles[:4] == [
        "input a (permeability)",
        "target u (solution)",
        "prediction of u (solution)",
        titles[3],
    ] and titles[3].startswith("|error| of u (solution) (rel. L2 ")
    assert fig._suptitle.get_text() == "fno (fno/darcy), run r: test split of d.h5"  # not the last panel's "|error|"
    assert _texts(path) == (texts["Title"], texts["Description"]) and texts["Title"].startswith("fno (fno/darcy)")


def test_learning_curve_one_axis_for_one_quantity_two_panels_otherwise_integer_epochs(tmp_path, monkeypatch):
    from neurodyn.plots import plot_learning_curve

    figs = _captured(monkeypatch)
    history = [{"epoch": e, "train_loss": 0.5 / (e + 1), "val": {"rel_l2": 0.6 / (e + 1) + 0.01}} for e in range(7)]
    plot_learning_curve(history, tmp_path / "same.png", objective="rel_l2", title="t", same_quantity=True)
    plot_learning_curve(history, tmp_path / "two.png", objective="mse", title="t")
    (same, _), (two, _) = figs
    panels = [ax for ax in same.axes]
    assert len(panels) == 1 and panels[0].get_ylabel() == "relative L2"
    assert {ln.get_label() for ln in panels[0].get_lines()} == {
        "training relative L2 (objective, mean over each epoch's batches)",
        "validation relative L2 (after each epoch)",
    }
    left, right = two.axes
    assert left.get_ylabel() == "training objective (mse)" and right.get_ylabel() == "validation relative L2"
    assert any("different quantities" in t.get_text() for t in two.texts)
    for ax in (panels[0], left, right):
        ticks = [t for t in ax.get_xticks() if 1 <= t <= 7]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks


@pytest.mark.slow
def test_every_png_of_a_run_names_its_run_model_and_data_and_the_metrics_are_defined(tmp_path, data_dir, capsys):
    """A 16 x 16 Darcy run through the CLI: every PNG's title names the model, the run and the data file; the panels
    name a (permeability) and u (solution); summary.md defines every metric it shows and has no empty band; the
    printed test metrics have no band the grid lacks (|k| <= 11.3 < 12: no high band)."""
    from neurodyn.cli import main

    assert (
        main(
            [
                "train",
                "fno/darcy",
                "--scale",
                "tiny",
                "--runs-dir",
                str(tmp_path / "runs"),
                "--run-name",
                "demo",
                "--no-progress",
                "data.resolution=16",
                "data.solve_resolution=16",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    run = tmp_path / "runs" / "demo"
    store = next(data_dir.rglob("*.h5")).name
    pngs = sorted(run.glob("*.png"))
    assert {p.name for p in pngs} == {"predictions.png", "learning_curve.png"}
    for png in pngs:
        title, panels = _texts(png)
        assert title.startswith("fno (fno/darcy), run demo: ") and store in title, (png.name, title)
        assert "|error|" != title
    _, panels = _texts(run / "predictions.png")
    assert "input a (permeability)" in panels and "target u (solution)" in panels
    summary = (run / "summary.md").read_text()
    rows = re.findall(r"^\| (\w+) \| [-\d.e]", summary, flags=re.M)
    assert rows and "frmse_high" not in rows and "nrmse" not in rows and "rel_l2" in rows
    for name in rows:
        line = re.search(rf"^- `{name}`: (.+)$", summary, flags=re.M)
        assert line and re.search(r"target's units|dimensionless", line.group(1)), name
    assert "- frmse_high: n/a, the grid has no Fourier mode with |k| >= 12" in summary
    assert "nrmse is not shown: for a field of one channel it is rel_l2 by definition" in summary
    table = printed.split("test metrics", 1)[1].split("run folder:", 1)[0]
    assert "frmse_low" in table and "frmse_high" not in table
