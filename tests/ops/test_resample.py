import pytest
import torch

from neurodyn.ops.resample import resample_grid


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_fields_linear_along_each_axis_are_reproduced_exactly(dims):
    """Oracle: multi-linear interpolation is exact on a field linear in each coordinate (x_i = i / (n - 1))."""

    def field(n):
        axes = torch.meshgrid(*[torch.linspace(0, 1, n, dtype=torch.float64)] * dims, indexing="ij")
        f = 1.0 + sum((j + 2) * a for j, a in enumerate(axes))
        if dims >= 2:
            f = f + 3 * axes[0] * axes[1]
        return torch.stack([f, -2 * f], dim=-1)[None].expand(2, *f.shape, 2)

    for src, dst in ((5, 9), (9, 5), (7, 12)):
        torch.testing.assert_close(resample_grid(field(src), (dst,) * dims), field(dst))


def test_restriction_to_half_resolution_picks_the_shared_points():
    x = torch.randn(3, 17, 9, 2)
    torch.testing.assert_close(resample_grid(x, (9, 5)), x[:, ::2, ::2])
    assert resample_grid(x, (17, 9)) is x


def test_shape_errors_name_the_shapes():
    with pytest.raises(ValueError, match=r"grid axes matching the target size \(4, 4\)"):
        resample_grid(torch.randn(2, 8, 1), (4, 4))


def test_resample_steps_keeps_equal_lengths_and_reproduces_lines():
    from neurodyn.ops.resample import resample_steps

    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 10, 2, generator=g, dtype=torch.float64)
    torch.testing.assert_close(resample_steps(x, None, 10), x)
    # a series linear in its step, with 4 real steps scattered among padding, becomes the same line on 7 steps
    mask = torch.zeros(1, 10, dtype=torch.bool)
    mask[0, [1, 4, 5, 9]] = True
    line = torch.zeros(1, 10, 1, dtype=torch.float64)
    line[0, [1, 4, 5, 9], 0] = torch.tensor([2.0, 5.0, 8.0, 11.0], dtype=torch.float64)
    want = torch.linspace(2.0, 11.0, 7, dtype=torch.float64)[None, :, None]
    torch.testing.assert_close(resample_steps(line, mask, 7), want)
    one = torch.zeros(1, 10, dtype=torch.bool)
    one[0, 3] = True
    torch.testing.assert_close(resample_steps(x[:1], one, 4), x[:1, 3:4].expand(1, 4, 2))
