import matplotlib.image as mpimg

from neurodyn.plots import plot_rollout_curves


def test_rollout_curves_png_has_the_figure_size(tmp_path):
    curves = {"model": [0.01, 0.02, 0.05], "persistence": [0.1, 0.2, 0.3]}
    path = plot_rollout_curves(curves, tmp_path / "sub" / "curves.png", "t", baselines=["persistence"], log=True)
    img = mpimg.imread(path)
    assert img.shape[:2] == (432, 660)  # 3.6 x 5.5 inches at 120 dpi
    assert img[..., :3].std() > 0.05  # something is drawn, not a blank canvas


def test_seed_mean_curves_cut_to_the_shortest_run_and_skip_empty_labels(tmp_path):
    from neurodyn.plots import plot_seed_mean_curves

    means = plot_seed_mean_curves({"a": [[1.0, 2.0, 3.0], [3.0, 4.0]], "b": [], "c": [[0.5, 0.25]]},
                                  tmp_path / "c.png", "loss", log=True)
    assert set(means) == {"a", "c"}
    assert means["a"].tolist() == [2.0, 3.0] and means["c"].tolist() == [0.5, 0.25]
    assert (tmp_path / "c.png").stat().st_size > 0
