"""neurodyn.train.fit: a user's own nn.Module trains, checkpoints, resumes and predicts through the library."""

import pytest
import torch
from torch import nn

import neurodyn
from neurodyn.errors import ConfigError
from neurodyn.train import fit
from neurodyn.train.runs import read_history


class TinyNet(nn.Module):
    """A user's module: a pointwise MLP on (B, n, C) fields, forward(x) only."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1, width), nn.GELU(), nn.Linear(width, 1))

    def forward(self, x):
        return self.net(x)


def _data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 32, 1, generator=g) * 4 - 2
    return x, 3.0 * torch.sin(x) + 10.0  # physical units: far from the normalised range


def test_a_users_module_trains_checkpoints_resumes_and_predicts(tmp_path, device):
    train, val, test = _data(64, 0), _data(16, 1), _data(16, 2)
    run = tmp_path / "run"
    options = dict(epochs=20, batch_size=16, lr=1e-2, schedule={"name": "cosine"}, device=device)
    with pytest.raises(KeyboardInterrupt):  # interrupted, then resumed: the same weights as a straight run
        from neurodyn.train import trainer as tr

        real = tr.Trainer._step

        def interrupted(self, ids):
            if (self.epoch, self.batch) == (10, 2):
                raise KeyboardInterrupt
            return real(self, ids)

        tr.Trainer._step = interrupted
        try:
            torch.manual_seed(0)
            fit(TinyNet(16), train, val, run_dir=run, init={"width": 16}, **options)
        finally:
            tr.Trainer._step = real
    fit(TinyNet(16), train, val, run_dir=run, init={"width": 16}, **options)  # resumes: its weights come from last.pt
    straight = tmp_path / "straight"
    torch.manual_seed(0)
    fit(TinyNet(16), train, val, run_dir=straight, init={"width": 16}, **options)
    a, b = (torch.load(r / "checkpoints" / "last.pt", weights_only=True) for r in (run, straight))
    for k in a["model_state"]:
        assert torch.equal(a["model_state"][k], b["model_state"][k])
    assert a["model"] == {"class": f"{TinyNet.__module__}:TinyNet", "init": {"width": 16}}
    history = read_history(run)
    assert len(history) == 20 and history[-1]["val"]["rel_l2"] < history[0]["val"]["rel_l2"]
    # predictions in physical units from the run folder alone (the class is imported here)
    trained = neurodyn.load_run(run, device=device)
    assert trained.device.type == device.type
    pred = trained.predict(test[0])
    err = ((pred - test[1]).flatten(1).norm(dim=1) / test[1].flatten(1).norm(dim=1)).mean()
    assert err < 0.05 and isinstance(trained.model, TinyNet) and not trained.model.training
    assert torch.allclose(neurodyn.load_run(run, model=TinyNet(16)).predict(test[0]), pred)


def test_fit_refuses_bad_options_and_changed_settings(tmp_path):
    train = _data(16, 0)
    with pytest.raises(ConfigError, match="unknown training option"):
        fit(TinyNet(), train, run_dir=tmp_path / "r", epochs=1, learning_rate=1e-3)
    with pytest.raises(ConfigError, match="x and y hold 16 and 3 samples"):
        fit(TinyNet(), (train[0], train[1][:3]), run_dir=tmp_path / "r", epochs=1)
    fit(TinyNet(), train, run_dir=tmp_path / "r", epochs=1)
    with pytest.raises(ConfigError, match=r"train\.lr"):
        fit(TinyNet(), train, run_dir=tmp_path / "r", epochs=1, lr=0.5)
    with pytest.raises(ConfigError, match="model=..."):
        from neurodyn.models.registry import rebuild

        rebuild({"class": "not_imported_package.mod:Net", "init": {}})
