"""DistributedDataParallel for one model of each family: two processes (gloo, CPU) follow the one-process run.

Oracle: the trainer splits every global batch across ranks and scales the loss so the averaged gradient is that of
the global-batch mean; two processes must therefore give the one-process losses and weights up to rounding. DDP
also refuses to train a model with a parameter that gets no gradient, so a pass proves every parameter is used.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest
import torch

# 18 training samples (20 with 2 carved for validation) in batches of 6: no last batch smaller than the two
# processes, which DDP drops (neurodyn.train.sampling) and one process keeps
STEADY = ["data.n_train=20", "train.batch_size=6"]
FAMILIES = {  # family: (preset, overrides, tolerance)
    "scan operator": ("lamo/darcy", STEADY, 1e-4),
    # the U-Net backbone's BatchNorm normalises each rank's half batch: close to one process, not equal
    "Kirchhoff": ("chonn_unet/darcy", STEADY, 5e-2),
    "S4D": ("stssm/burgers", ["train.batch_size=4"], 1e-4),
    "sequence": ("nac/event_digits", ["train.batch_size=4"], 1e-4),
}


GLOO_EXIT_ABORT = "terminate called without an active exception"


def _run(args, env, extra):
    return subprocess.run([sys.executable, *extra, "-m", "neurodyn", *args], env=env, capture_output=True, text=True,
                          timeout=600)


def _losses(run):
    return [r["train_loss"] for line in (run / "metrics.jsonl").read_text().splitlines()
            if "train_loss" in (r := json.loads(line))]


@pytest.mark.slow
@pytest.mark.parametrize("family", list(FAMILIES))
def test_two_processes_follow_one(tmp_path, data_dir, family):
    preset, overrides, tol = FAMILIES[family]
    args = ["train", preset, "--scale", "tiny", "--no-progress", "train.epochs=2", *overrides,
            "--runs-dir", str(tmp_path)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NEURODYN_DATA": str(data_dir)}
    one = _run([*args, "--run-name", "one"], env, [])
    assert one.returncode == 0, one.stderr[-3000:]
    port = str(29500 + (os.getpid() + hash(family)) % 1000)
    launch = ["-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", port]
    two = _run([*args, "--run-name", "two"], env, launch)
    if two.returncode != 0 and GLOO_EXIT_ABORT in two.stderr:
        # gloo's worker threads now and then abort a rank as it exits, after the run is written (seen about once in
        # ten suites on a loaded 2-core machine, despite the barrier and destroy_process_group in cli.cmd_train):
        # train again once, from nothing; any other failure, or the abort twice in a row, fails
        shutil.rmtree(tmp_path / "two")
        two = _run([*args, "--run-name", "two"], env, launch)
    assert two.returncode == 0, two.stderr[-3000:]
    l1, l2 = _losses(tmp_path / "one"), _losses(tmp_path / "two")
    assert len(l1) == len(l2) == 2
    assert l2 == pytest.approx(l1, rel=tol)
    if tol > 1e-4:
        return
    w1, w2 = (torch.load(tmp_path / r / "checkpoints" / "last.pt", weights_only=True)["model_state"]
              for r in ("one", "two"))
    for k in w1:  # Adam divides by sqrt(v): a parameter with a near-zero gradient amplifies rounding differences
        torch.testing.assert_close(w2[k], w1[k], rtol=1e-2, atol=5e-3)
