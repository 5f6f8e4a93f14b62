"""Plots written into run folders: prediction panels and learning curves (PNG, matplotlib Agg)."""
from __future__ import annotations

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


def plot_predictions(x: torch.Tensor, y: torch.Tensor, pred: torch.Tensor, path: str | Path,
                     channel: int = 0) -> Path:
    """Rows of input / truth / prediction / |error| for a few samples.

    x: (B, *spatial, C_in), y and pred: (B, *spatial, C_out); 2-D grids are drawn as images, 1-D as lines.
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
    return save_figure(fig, path)


def plot_learning_curve(history: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """Training loss and validation relative L2 per epoch (log scale)."""
    path = Path(path)
    fig, ax = plt.subplots(figsize=(6, 4))
    if history:
        ax.semilogy([h["epoch"] + 1 for h in history], [h["train_loss"] for h in history], label="train loss")
        ev = [(h["epoch"] + 1, h["val"]["rel_l2"]) for h in history if "val" in h]
        if ev:
            ax.semilogy(*zip(*ev), "o-", ms=3, label="validation rel. L2")
    ax.set_xlabel("epoch"), ax.set_ylabel("loss"), ax.grid(True, which="both", alpha=0.3), ax.legend()
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

def write_run_plots(run_dir: str | Path, device: str | torch.device = "cpu") -> None:
    """Draw a trained run's plots into its folder from its last checkpoint and ``metrics.jsonl``.

    Steady: ``predictions.png``; autoregressive: ``predictions.png`` (last given frame / truth / rollout
    at the last step), ``rollout.gif`` and ``rollout_error.png``; sequence: ``predictions.png``
    (confusion matrix, or prediction vs target). Always ``learning_curve.png``.
    """
    from .train.rollout import to_frames
    from .train.runs import batches, read_history, read_test_metrics, restore_run
    from .train.tasks import AutoregressiveTask

    run_dir = Path(run_dir)
    run = restore_run(run_dir, device=device)
    task, model, history = run.task, run.model, read_history(run_dir)
    test = run.data["sets"].get("test")
    has_test = test is not None and len(test) > 0
    if getattr(task, "name", "") == "sequence":
        plot_sequence_predictions(task, model, batches(test, run.eval_batch_size, device) if has_test else [],
                                  run_dir / "predictions.png")
        plot_sequence_learning_curve(history, task.monitor[0], run_dir / "learning_curve.png")
        return
    if has_test:
        batch = next(batches(test, run.train_config.n_plot, device, count=run.train_config.n_plot))
        with torch.no_grad():
            pred = task.predict(model, batch)
        if isinstance(task, AutoregressiveTask):
            frames = [to_frames(t, task.channels, task.fac) for t in (batch["y"], pred)]
            plot_rollout_animation(frames[0][0], frames[1][0], run_dir / "rollout.gif")
            per_step = read_test_metrics(run_dir).get("test", {}).get("last", {}).get("rel_l2_per_step")
            if per_step:
                plot_rollout_error(per_step, run_dir / "rollout_error.png")
            history_frames = to_frames(batch["x"], task.channels, task.fac)
            plot_predictions(history_frames[:, -1], frames[0][:, -1], frames[1][:, -1], run_dir / "predictions.png")
        else:
            plot_predictions(batch["x"], batch["y"], pred, run_dir / "predictions.png")
    plot_learning_curve(history, run_dir / "learning_curve.png")


def plot_sequence_predictions(task, model: torch.nn.Module, batches, path: str | Path) -> Path:
    """Confusion matrix (classification) or prediction vs target (regression) of a sequence task."""
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
    fig, ax = plt.subplots(figsize=(5, 4.5))
    if preds:
        p, y = torch.cat(preds), torch.cat(ys)
        if task.kind == "classification":
            k = p.shape[-1]
            cm = np.zeros((k, k))
            np.add.at(cm, (y.numpy(), p.argmax(-1).numpy()), 1)
            ax.imshow(cm / cm.sum(1, keepdims=True).clip(min=1), cmap="Blues", vmin=0, vmax=1)
            ax.set_xlabel("predicted class"), ax.set_ylabel("true class")
            ax.set_title(f"confusion (accuracy {(p.argmax(-1) == y).float().mean():.3f})")
        else:
            ax.scatter(y[:, 0].numpy(), p[:, 0].numpy(), s=6, alpha=0.6)
            lo, hi = float(min(y.min(), p.min())), float(max(y.max(), p.max()))
            ax.plot([lo, hi], [lo, hi], "k--", lw=1)
            ax.set_xlabel("target"), ax.set_ylabel("prediction")
    return save_figure(fig, path)


def plot_sequence_learning_curve(history: Sequence[dict[str, Any]], key: str, path: str | Path) -> Path:
    """Train loss and the monitored validation metric ``key`` (second axis) per epoch."""
    fig, ax = plt.subplots(figsize=(6, 4))
    if history:
        ax.plot([h["epoch"] + 1 for h in history], [h["train_loss"] for h in history], label="train loss")
        ev = [(h["epoch"] + 1, h["val"][key]) for h in history if "val" in h]
        if ev:
            ax2 = ax.twinx()
            ax2.plot(*zip(*ev), "o-", ms=3, color="C1", label=f"validation {key}")
            ax2.set_ylabel(f"validation {key}")
    ax.set_xlabel("epoch"), ax.set_ylabel("train loss"), ax.grid(True, alpha=0.3)
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
    """Validation rel. L2 against training seconds, one line per run (``curve_seconds`` / ``curve_rel_l2`` of
    :mod:`neurodyn.compare` records), one colour per preset; log-scaled error."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    colours: dict[str, Any] = {}
    for r in records:
        key = f"{r['model']} ({r['preset']})"
        first = key not in colours
        colours.setdefault(key, f"C{len(colours) % 10}")
        ax.plot(r["curve_seconds"], r["curve_rel_l2"], color=colours[key], marker=".", lw=1.2,
                label=key if first else None)
    metric = records[0].get("metric", "rel_l2") if records else "rel_l2"
    ax.set_xlabel("training time (s)")
    ax.set_ylabel(f"validation {'rel. L2' if metric == 'rel_l2' else metric}")
    if metric != "accuracy":
        ax.set_yscale("log")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("error against wall-clock training time")
    return save_figure(fig, path)
