"""Plots written into run folders: prediction panels and learning curves (PNG, matplotlib Agg)."""
from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()


def save_figure(fig, path: str | Path, dpi: int = 90) -> Path:
    """Lay out ``fig``, write it to ``path`` (creating the folder) and close it."""
    path = Path(path)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def plot_point_cloud_predictions(pos: torch.Tensor, y: torch.Tensor, pred: torch.Tensor, path: str | Path,
                                 channel: int = 0, mask: torch.Tensor | None = None, title: str = "") -> Path:
    """Rows of truth / prediction / |error| of a few point clouds, each point drawn at its coordinates (the first
    two of ``pos``) and coloured by the value. pos: (B, P, d), y and pred: (B, P, C); mask (B, P): real points
    (padding is not drawn)."""
    pos, y, pred = _np(pos), _np(y)[..., channel], _np(pred)[..., channel]
    keep = np.ones(y.shape, dtype=bool) if mask is None else mask.detach().cpu().numpy().astype(bool)
    n, d = pos.shape[0], pos.shape[-1]
    fig, axes = plt.subplots(n, 3, figsize=(11, 3.2 * n), squeeze=False)
    for i in range(n):
        k = keep[i]
        px, py = pos[i, k, 0], pos[i, k, 1] if d > 1 else np.zeros(k.sum())
        err = np.abs(pred[i, k] - y[i, k])
        lo, hi = y[i, k].min(), y[i, k].max()
        rel = np.linalg.norm(err) / max(np.linalg.norm(y[i, k]), 1e-12)
        for ax, (vals, name, lim, cmap) in zip(axes[i], ((y[i, k], "truth", (lo, hi), "viridis"),
                                                         (pred[i, k], "prediction", (lo, hi), "viridis"),
                                                         (err, f"|error| (rel. L2 {rel:.3g})", None, "magma"))):
            sc = ax.scatter(px, py, c=vals, s=6, cmap=cmap, vmin=None if lim is None else lim[0],
                            vmax=None if lim is None else lim[1])
            ax.set_title(f"{name}, {int(k.sum())} points", fontsize=9)
            ax.set_xlabel("coordinate 0"), ax.set_ylabel("coordinate 1" if d > 1 else "")
            ax.set_aspect("equal", adjustable="datalim")
            fig.colorbar(sc, ax=ax, fraction=0.046, pad=0.04)
    if title:
        fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)


def plot_predictions(x: torch.Tensor, y: torch.Tensor, pred: torch.Tensor, path: str | Path,
                     channel: int = 0, title: str = "") -> Path:
    """Rows of input / truth / prediction / |error| for a few samples.

    x: (B, *spatial, C_in), y and pred: (B, *spatial, C_out); 2-D grids are drawn as images, 1-D as lines (point
    clouds: :func:`plot_point_cloud_predictions`).
    """
    x, y, pred = _np(x), _np(y), _np(pred)
    n = x.shape[0]
    spatial = y.ndim - 2
    path = Path(path)
    if spatial == 2:
        fig, axes = plt.subplots(n, 4, figsize=(12, 2.8 * n), squeeze=False)
        for i in range(n):
            err = np.abs(pred[i, ..., channel] - y[i, ..., channel])
            lo, hi = y[i, ..., channel].min(), y[i, ..., channel].max()
            panels = [(x[i, ..., 0], "input", None), (y[i, ..., channel], "truth", (lo, hi)),
                      (pred[i, ..., channel], "prediction", (lo, hi)), (err, "|error|", None)]
            for ax, (img, title, lim) in zip(axes[i], panels):
                im = ax.imshow(img.T, origin="lower", cmap="magma" if title == "|error|" else "viridis",
                               vmin=None if lim is None else lim[0], vmax=None if lim is None else lim[1])
                rel = np.linalg.norm(err) / max(np.linalg.norm(y[i, ..., channel]), 1e-12)
                ax.set_title(f"{title}" + (f" (rel. L2 {rel:.3g})" if title == "|error|" else ""), fontsize=9)
                ax.set_xticks([]), ax.set_yticks([])
                fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    elif spatial == 1:
        fig, axes = plt.subplots(n, 2, figsize=(10, 2.5 * n), squeeze=False)
        for i in range(n):
            axes[i, 0].plot(x[i, :, 0], color="0.4", label="input")
            axes[i, 0].plot(y[i, :, channel], label="truth")
            axes[i, 0].plot(pred[i, :, channel], "--", label="prediction")
            axes[i, 1].plot(np.abs(pred[i, :, channel] - y[i, :, channel]), color="C3")
            axes[i, 1].set_title("|error|", fontsize=9)
        axes[0, 0].legend(fontsize=8)
    else:  # point clouds and 3-D fields: scatter of truth vs prediction
        fig, ax = plt.subplots(figsize=(4, 4))
        ax.scatter(y[..., channel].ravel(), pred[..., channel].ravel(), s=1, alpha=0.3)
        lims = [y[..., channel].min(), y[..., channel].max()]
        ax.plot(lims, lims, "k--", lw=1)
        ax.set_xlabel("truth"), ax.set_ylabel("prediction")
    if title:
        fig.suptitle(title, fontsize=10)
    return save_figure(fig, path)


def plot_learning_curve(history: Sequence[dict[str, Any]], path: str | Path, objective: str = "loss") -> Path:
    """The training objective (``objective``: the loss's name, mean over each epoch's batches; left axis) and the
    validation relative L2 (right axis) per epoch, both log-scaled: two quantities, each named on its axis."""
    path = Path(path)
    fig, ax = plt.subplots(figsize=(6.4, 4))
    lines = []
    if history:
        epochs, losses = [h["epoch"] + 1 for h in history], [h["train_loss"] for h in history]
        lines += ax.semilogy(epochs, losses, "s-", ms=3, color="C0", label=f"training objective ({objective})")
        ev = [(h["epoch"] + 1, h["val"]["rel_l2"]) for h in history if "val" in h and "rel_l2" in h["val"]]
        if ev:
            ax2 = ax.twinx()
            lines += ax2.semilogy(*zip(*ev), "o-", ms=3, color="C1", label="validation rel. L2")
            ax2.set_ylabel("validation relative L2", color="C1")
    ax.set_xlabel("epoch"), ax.set_ylabel(f"training objective ({objective})", color="C0")
    ax.grid(True, which="both", alpha=0.3)
    if lines:
        ax.legend(lines, [ln.get_label() for ln in lines], fontsize=8)
    return save_figure(fig, path)


def plot_rollout_error(per_step: Sequence[float], path: str | Path, label: str = "rollout") -> Path:
    """Relative L2 error of each rollout step (mean over test trajectories)."""
    path = Path(path)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.semilogy(np.arange(1, len(per_step) + 1), per_step, "o-", ms=3, label=label)
    ax.set_xlabel("rollout step"), ax.set_ylabel("relative L2"), ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return save_figure(fig, path)


def plot_rollout_curves(curves: dict[str, Sequence[float]], path: str | Path, title: str = "",
                        baselines: Sequence[str] = (), log: bool = False) -> Path:
    """Per-step relative L2 of several models on one axis (one curve per name; ``baselines`` dashed)."""
    path = Path(path)
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for name, c in curves.items():
        ax.plot(np.arange(1, len(c) + 1), c, label=name, ls="--" if name in baselines else "-")
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("rollout step"), ax.set_ylabel("relative L2"), ax.grid(True, which="both", alpha=0.3)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7)
    return save_figure(fig, path, dpi=120)


def plot_rollout_animation(truth: torch.Tensor, pred: torch.Tensor, path: str | Path, channel: int = 0,
                           fps: int = 4) -> Path:
    """GIF of truth vs prediction vs error over a rollout; truth, pred: (T, *spatial, C), 1-D or 2-D."""
    from matplotlib.animation import FuncAnimation, PillowWriter

    truth, pred = _np(truth)[..., channel], _np(pred)[..., channel]
    path = Path(path)
    lo, hi = truth.min(), truth.max()
    err_max = max(np.abs(pred - truth).max(), 1e-12)
    if truth.ndim == 3:
        fig, axes = plt.subplots(1, 3, figsize=(10, 3.4))
        ims = [ax.imshow(img.T, origin="lower", vmin=v0, vmax=v1, cmap=cm) for ax, img, v0, v1, cm in
               zip(axes, (truth[0], pred[0], np.abs(pred[0] - truth[0])), (lo, lo, 0), (hi, hi, err_max),
                   ("viridis", "viridis", "magma"))]
        for ax, title in zip(axes, ("truth", "prediction", "|error|")):
            ax.set_title(title, fontsize=9), ax.set_xticks([]), ax.set_yticks([])

        def update(k):
            for im, img in zip(ims, (truth[k], pred[k], np.abs(pred[k] - truth[k]))):
                im.set_data(img.T)
            fig.suptitle(f"rollout step {k + 1}", fontsize=10)
            return ims
    else:
        fig, ax = plt.subplots(figsize=(6, 3.4))
        (lt,) = ax.plot(truth[0], label="truth")
        (lp,) = ax.plot(pred[0], "--", label="prediction")
        ax.set_ylim(lo - 0.1 * (hi - lo), hi + 0.1 * (hi - lo)), ax.legend(fontsize=8)

        def update(k):
            lt.set_ydata(truth[k]), lp.set_ydata(pred[k])
            ax.set_title(f"rollout step {k + 1}", fontsize=10)
            return lt, lp
    anim = FuncAnimation(fig, update, frames=len(truth), blit=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    anim.save(path, writer=PillowWriter(fps=fps))
    plt.close(fig)
    return path


# --------------------------------------------------------------------------------------------------
# The plots of a trained run folder
# --------------------------------------------------------------------------------------------------

def write_run_plots(run_dir: str | Path, device: str | torch.device = "cpu") -> list[str]:
    """Draw a trained run's plots into its folder from its last checkpoint and ``metrics.jsonl``, and link them
    from its ``summary.md`` (:func:`link_plots`); returns the names of the files written.

    One prediction plot per test set: ``predictions.png`` of the first (the test split, else the first test file)
    and ``predictions_<name>.png`` of each other test file. Steady: input / truth / prediction / error (point
    clouds: over their coordinates); autoregressive: the last step of a rollout, plus ``rollout.gif`` and
    ``rollout_error.png`` of the first set; sequence: the confusion matrix (classification, class names on the
    axes) or prediction against target (regression). Always ``learning_curve.png``.
    """
    from .train.predict import load_run
    from .train.runs import read_history

    run_dir = Path(run_dir)
    run = load_run(run_dir, device=device)
    history = read_history(run_dir)
    sets = {name: dataset for name, dataset in run.test_sets(required=False).items() if len(dataset)}
    written = []
    for k, (name, dataset) in enumerate(sets.items()):
        out = run_dir / ("predictions.png" if k == 0 else f"predictions_{_file_name(name)}.png")
        label = "test split" if name == "test" else f"test file {name!r}"
        written += _plot_set(run, dataset, out, label, run_dir, first=k == 0, device=device)
    if getattr(run.task, "name", "") == "sequence":
        plot_sequence_learning_curve(history, run.task.monitor[0], run_dir / "learning_curve.png",
                                     objective="cross-entropy" if run.task.kind == "classification"
                                     else "MSE of normalised targets")
    else:
        plot_learning_curve(history, run_dir / "learning_curve.png", objective=str(run.train_config.loss))
    written.append("learning_curve.png")
    link_plots(run_dir, written)
    return written


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)


def _plot_set(run, dataset, out: Path, label: str, run_dir: Path, first: bool, device) -> list[str]:
    """The prediction plot(s) of one test set; returns the file names written."""
    from .train.rollout import to_frames
    from .train.runs import batches, read_test_metrics
    from .train.tasks import AutoregressiveTask

    task, model = run.task, run.model
    if getattr(task, "name", "") == "sequence":
        classes = getattr(dataset, "classes", None)  # the test split's (the training store's) class names
        plot_sequence_predictions(task, model, batches(dataset, run.eval_batch_size, device), out, title=label,
                                  class_names=classes)
        return [out.name]
    n_plot = run.train_config.logging.n_plot
    batch = next(batches(dataset, n_plot, device, count=n_plot))
    with torch.no_grad():
        pred = task.predict(model, batch)
    title = f"{label}: first {batch['y'].shape[0]} sample(s)"
    if not isinstance(task, AutoregressiveTask):
        if getattr(task, "grid", True) is False and batch.get("pos") is not None:
            plot_point_cloud_predictions(batch["pos"], batch["y"], pred, out, mask=batch.get("mask"), title=title)
        else:
            plot_predictions(batch["x"], batch["y"], pred, out, title=title)
        return [out.name]
    frames = [to_frames(t, task.channels, task.fac) for t in (batch["y"], pred)]
    history_frames = to_frames(batch["x"], task.channels, task.fac)
    plot_predictions(history_frames[:, -1], frames[0][:, -1], frames[1][:, -1], out, title=title + ", last step")
    written = [out.name]
    if first:
        plot_rollout_animation(frames[0][0], frames[1][0], run_dir / "rollout.gif")
        written.append("rollout.gif")
        name = "test" if label == "test split" else label.split("'")[1]
        per_step = read_test_metrics(run_dir).get(name, {}).get("last", {}).get("rel_l2_per_step")
        if per_step:
            plot_rollout_error(per_step, run_dir / "rollout_error.png")
            written.append("rollout_error.png")
    return written


PLOTS_HEADER = "## Plots"


IMAGE_LINK = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")


def linked_images(run_dir: str | Path) -> list[str]:
    """The image file names ``run_dir/summary.md`` links (``![...](name)``), in order; ``[]`` without a summary."""
    summary = Path(run_dir) / "summary.md"
    return IMAGE_LINK.findall(summary.read_text()) if summary.is_file() else []


def link_plots(run_dir: str | Path, names: Sequence[str]) -> None:
    """Replace the image links of ``run_dir/summary.md`` with links to the files ``names`` that exist there (a
    summary never links an image that was not written)."""
    summary = Path(run_dir) / "summary.md"
    if not summary.exists():
        return
    lines = summary.read_text().splitlines()
    if PLOTS_HEADER in lines:
        lines = lines[:lines.index(PLOTS_HEADER)]
    lines = [ln for ln in lines if not ln.startswith("![")]
    while lines and not lines[-1].strip():
        lines.pop()
    links = [f"![{Path(n).stem.replace('_', ' ')}]({n})" for n in names if (Path(run_dir) / n).is_file()]
    if links:
        lines += ["", PLOTS_HEADER, ""] + [x for link in links for x in (link, "")]
    summary.write_text("\n".join(lines).rstrip("\n") + "\n")


def plot_sequence_predictions(task, model: torch.nn.Module, batches, path: str | Path, title: str = "",
                              class_names: Sequence[str] | None = None) -> Path:
    """Confusion matrix (classification: row-normalised, counts written in the cells, ``class_names`` on the axes,
    else class indices) or prediction against target (regression, one panel per target) of a sequence task."""
    preds, ys = [], []
    model.eval()
    with torch.no_grad():
        for batch in batches:
            p, y = task.predict(model, batch), batch["y"]
            m = task._step_mask(batch)
            if m is not None:
                p, y = p[m], y[m]
            preds.append(p.cpu())
            ys.append(y.cpu())
    if not preds:
        raise ValueError(f"no samples to plot into {path}: the test set is empty")
    p, y = torch.cat(preds).float(), torch.cat(ys)
    if task.kind == "classification":
        k = p.shape[-1]
        names = list(class_names) if class_names is not None and len(class_names) == k else [str(i) for i in range(k)]
        cm = np.zeros((k, k))
        np.add.at(cm, (y.numpy(), p.argmax(-1).numpy()), 1)
        size = min(12.0, 3.5 + 0.45 * k)
        fig, ax = plt.subplots(figsize=(size + 1, size))
        im = ax.imshow(cm / cm.sum(1, keepdims=True).clip(min=1), cmap="Blues", vmin=0, vmax=1)
        if k <= 20:
            for i in range(k):
                for j in range(k):
                    if cm[i, j]:
                        ax.text(j, i, f"{int(cm[i, j])}", ha="center", va="center", fontsize=7,
                                color="white" if cm[i, j] / max(cm[i].sum(), 1) > 0.5 else "black")
        ax.set_xticks(range(k), names, rotation=45 if max(map(len, names)) > 3 else 0, ha="right", fontsize=8)
        ax.set_yticks(range(k), names, fontsize=8)
        ax.set_xlabel("predicted class"), ax.set_ylabel("true class")
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="fraction of the true class")
        ax.set_title(f"{title + ': ' if title else ''}{len(y)} samples, accuracy "
                     f"{(p.argmax(-1) == y).float().mean():.3f}", fontsize=9)
    else:
        p, y = p.reshape(len(p), -1), y.float().reshape(len(y), -1)
        n_t = min(p.shape[1], 4)
        fig, axes = plt.subplots(1, n_t, figsize=(4.2 * n_t, 4), squeeze=False)
        for j, ax in enumerate(axes[0]):
            ax.scatter(y[:, j].numpy(), p[:, j].numpy(), s=6, alpha=0.6)
            lo, hi = float(min(y[:, j].min(), p[:, j].min())), float(max(y[:, j].max(), p[:, j].max()))
            ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="prediction = target")
            ax.set_xlabel(f"true target {j}" if n_t > 1 else "true target")
            ax.set_ylabel("predicted target"), ax.legend(fontsize=7)
        axes[0, 0].set_title(f"{title + ': ' if title else ''}{len(y)} values", fontsize=9)
    return save_figure(fig, path)


def plot_sequence_learning_curve(history: Sequence[dict[str, Any]], key: str, path: str | Path,
                                 objective: str = "loss") -> Path:
    """The training objective (``objective``, left axis) and the monitored validation metric ``key`` (right axis)
    per epoch, each named on its axis."""
    fig, ax = plt.subplots(figsize=(6.4, 4))
    lines = []
    if history:
        epochs, losses = [h["epoch"] + 1 for h in history], [h["train_loss"] for h in history]
        lines += ax.plot(epochs, losses, "s-", ms=3, color="C0", label=f"training objective ({objective})")
        ev = [(h["epoch"] + 1, h["val"][key]) for h in history if "val" in h and key in h["val"]]
        if ev:
            ax2 = ax.twinx()
            lines += ax2.plot(*zip(*ev), "o-", ms=3, color="C1", label=f"validation {key}")
            ax2.set_ylabel(f"validation {key}", color="C1")
    ax.set_xlabel("epoch"), ax.set_ylabel(f"training objective ({objective})", color="C0")
    ax.grid(True, alpha=0.3)
    if lines:
        ax.legend(lines, [ln.get_label() for ln in lines], fontsize=8)
    return save_figure(fig, path)


def plot_seed_mean_curves(groups: dict[str, Sequence[Sequence[float]]], path: str | Path, ylabel: str,
                          title: str = "", log: bool = False) -> dict[str, np.ndarray]:
    """Per-epoch curves of several runs per label: the mean over each label's runs (cut to the shortest) on one
    axis, labelled with the run count. Returns ``label -> mean curve`` (labels without runs are skipped)."""
    means = {}
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for label, curves in groups.items():
        curves = [c for c in curves if len(c)]
        if not curves:
            continue
        n = min(len(c) for c in curves)
        means[label] = np.mean([list(c)[:n] for c in curves], axis=0)
        seeds = f"{len(curves)} seed{'s' if len(curves) > 1 else ''}"
        ax.plot(np.arange(1, n + 1), means[label], label=f"{label} ({seeds})")
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("epoch"), ax.set_ylabel(ylabel), ax.grid(True, which="both", alpha=0.3), ax.legend(fontsize=7)
    ax.set_title(title, fontsize=10)
    save_figure(fig, path, dpi=120)
    return means


def plot_error_vs_time(records: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """The validation metric against training seconds, one line per run (``curve_seconds`` / ``curve_rel_l2`` of
    :mod:`neurodyn.compare` records: the run's monitored metric, named by ``metric``), one colour per preset, and
    the budget (``budget``: ``"<B>s"`` a dashed line at B seconds, ``"<N>ep"`` named in the title). The axis names
    the metric; error metrics are log-scaled, accuracy is not."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    colours: dict[str, Any] = {}
    for r in records:
        key = f"{r['model']} ({r['preset']})"
        first = key not in colours
        colours.setdefault(key, f"C{len(colours) % 10}")
        ax.plot(r["curve_seconds"], r["curve_rel_l2"], color=colours[key], marker=".", lw=1.2,
                label=key if first else None)
    metric = records[0].get("metric", "rel_l2") if records else "rel_l2"
    name = {"rel_l2": "relative L2", "rmse": "RMSE", "accuracy": "accuracy"}.get(metric, metric)
    ax.set_xlabel("training time (s)")
    ax.set_ylabel(f"validation {name}" + (" (higher is better)" if metric == "accuracy" else " (lower is better)"))
    if metric != "accuracy" and any(v > 0 for r in records for v in r["curve_rel_l2"]):
        ax.set_yscale("log")
    budgets = sorted({str(r["budget"]) for r in records if r.get("budget")})
    seconds = [float(b[:-1]) for b in budgets if b.endswith("s") and b[:-1].replace(".", "", 1).isdigit()]
    for k, b in enumerate(seconds):
        ax.axvline(b, color="0.3", ls="--", lw=1, label=f"budget {b:g} s" if k == 0 or len(seconds) > 1 else None)
    epochs = [b[:-2] for b in budgets if b.endswith("ep")]
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    title = f"validation {name} against wall-clock training time"
    if epochs:
        title += f"\n(budget: {', '.join(epochs)} epoch{'s' if epochs != ['1'] else ''} per model)"
    ax.set_title(title, fontsize=10)
    return save_figure(fig, path)
