"""Autoregressive rollouts and the frame layouts they move between.

Trajectory frames travel in one of two layouts (``TimeWindowDataset.frames_as_channels``):

* channels: (B, *spatial, t * C), frames stacked oldest first along channels (FNO's layout);
* time:     (B, t, *spatial, C).

``to_frames`` / ``from_frames`` convert to and from the canonical (B, t, *spatial, C).
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def to_frames(x: torch.Tensor, channels: int, frames_as_channels: bool) -> torch.Tensor:
    """Model layout -> (B, t, *spatial, C)."""
    if not frames_as_channels:
        return x
    b, *spatial, tc = x.shape
    if tc % channels:
        raise ValueError(
            f"a stacked-frames tensor of shape {tuple(x.shape)} does not hold whole frames of {channels} channel(s)"
        )
    return x.reshape(b, *spatial, tc // channels, channels).movedim(-2, 1)


def from_frames(f: torch.Tensor, frames_as_channels: bool) -> torch.Tensor:
    """(B, t, *spatial, C) -> model layout."""
    if not frames_as_channels:
        return f
    return f.movedim(1, -2).reshape(f.shape[0], *f.shape[2:-1], -1)


def rollout(step: Callable[[torch.Tensor, int], torch.Tensor], history: torch.Tensor, n_frames: int) -> torch.Tensor:
    """Feed predictions back in until ``n_frames`` new frames exist.

    Args:
        step: ``step(window, k) -> (B, s, *spatial, C)`` the next s >= 1 frames from the last t_in
            frames ``window: (B, t_in, *spatial, C)``; ``k`` is the number of frames predicted so far.
        history: (B, t_in, *spatial, C) true initial frames.
    Returns:
        (B, n_frames, *spatial, C) predicted frames (a last step that overshoots is cut).
    """
    t_in = history.shape[1]
    frames = history
    made = 0
    while made < n_frames:
        new = step(frames[:, -t_in:], made)
        frames = torch.cat([frames, new], dim=1)
        made += new.shape[1]
    return frames[:, t_in : t_in + n_frames]


def teacher_forced(
    step: Callable[[torch.Tensor, int], torch.Tensor], history: torch.Tensor, truth: torch.Tensor
) -> torch.Tensor:
    """Predict every frame of ``truth`` from true frames only (one-step-ahead, no feedback).

    Args:
        step: as for ``rollout``.
        history: (B, t_in, *spatial, C) true frames before the horizon.
        truth: (B, n, *spatial, C) true frames of the horizon.
    Returns:
        (B, n, *spatial, C): the prediction of frames ``k .. k+s-1`` comes from the true frames
        ``k - t_in .. k - 1``, so an error made at one step never reaches the next.
    """
    t_in, n = history.shape[1], truth.shape[1]
    frames = torch.cat([history, truth], dim=1)
    out, made = [], 0
    while made < n:
        new = step(frames[:, made : made + t_in], made)
        out.append(new)
        made += new.shape[1]
    return torch.cat(out, dim=1)[:, :n]
