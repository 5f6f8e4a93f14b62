"""The UEA/UCR floors rerun (neurodyn_lab.time_series.uea_floors_rerun and _verdicts): a fold's stores hold exactly
its cases in the order the run's validation split needs; an archive file whose bytes are not the protocol's is
refused; the stages run under a frozen, committed protocol, the refits train the chosen neural candidates for their
folds' mean epochs, and the floors read "met" / "not met" only on the protocol's complete records. The stages'
training is replaced by a stand-in compare that writes records (nothing trains); the protocols live in temporary
git repositories (test_protocols' helper)."""

import json

import numpy as np
import pytest
import yaml
from test_protocols import git  # noqa: I001

from neurodyn.data.assembly import build_sequence_data
from neurodyn.data.formats.convert import convert_to_store
from neurodyn.data.store import StoredDataset
from neurodyn.errors import DataError
from neurodyn_lab import protocols
from neurodyn_lab.records import write_store
from neurodyn_lab.time_series import uea
from neurodyn_lab.time_series import uea_floors_rerun as rerun_mod
from neurodyn_lab.time_series import uea_floors_verdicts as verdicts
from neurodyn_lab.time_series.uea_floors import HELD_OUT, TEST, Job, fold_split, jobs


def tiny_store(tmp_path, n=20, classes=("lo", "hi")):
    """A classification store of ``n`` cases of unequal lengths (6-9 steps, 2 channels), labels alternating."""
    rng = np.random.default_rng(0)
    T = 9
    lengths = 6 + np.arange(n) % 4
    mask = (np.arange(T)[None] < lengths[:, None]).astype(np.uint8)
    x = rng.normal(size=(n, T, 2))
    x[mask == 0] = np.nan
    x[:, :, 0] += 100 * np.arange(n)[:, None]  # case i's channel 0 sits near 100 i: a case is known by its values
    y = np.arange(n) % len(classes)
    src = tmp_path / "tiny.npz"
    np.savez(src, x=x, mask=mask, y=y, classes=np.asarray(classes))
    return convert_to_store(src, tmp_path / "whole" / "train.h5")


def case_ids(store):
    cases = uea.read_cases(store)
    first = np.nanmean(np.where(cases["mask"][..., None] > 0, cases["x"], np.nan)[:, :, 0], axis=1)
    return np.round(first / 100).astype(int).tolist(), cases


SEL = {"k": 5, "repeats": 2, "fold_seeds": [0, 1], "training_seed": 0}


def test_a_fold_store_holds_its_cases_in_the_order_its_validation_split_needs(tmp_path):
    whole = tiny_store(tmp_path)
    ids, cases = case_ids(whole)
    assert ids == list(range(20))
    p = protocols.Protocol("t/p", tmp_path / "p.yaml", "0" * 64, {"selection": SEL})
    file = {"name": "Tiny", "task": "classification"}
    tr, held, n_val = rerun_mod.fold_stores(p, file, whole, repeat=1, fold=3)
    fit, val, out = fold_split(cases["y"], 5, 1, 3)
    got, tr_cases = case_ids(tr)
    assert got == [*fit.tolist(), *val.tolist()] and n_val == len(val)
    assert case_ids(held)[0] == out.tolist()
    assert tr_cases["classes"] == ["lo", "hi"] and (tr_cases["y"] == cases["y"][got]).all()
    assert (tr_cases["mask"] == cases["mask"][got]).all()  # unequal lengths kept
    # the run's data, as the rerun configures it, validates on exactly the fold's validation cases
    section = {"path": str(tr), "n_train": "all", "n_val": n_val, "shuffle": False, "max_steps": 0}
    data = build_sequence_data({"task": "sequence", "data": section}, StoredDataset(tr))
    assert len(data["sets"]["val"]) == len(val) and len(data["sets"]["train"]) == len(fit)
    assert (np.asarray(data["sets"]["val"].ids) == np.arange(len(fit), len(fit) + len(val))).all()


def test_an_archive_file_whose_bytes_are_not_the_protocols_is_refused(tmp_path):
    (tmp_path / "a" / "X").mkdir(parents=True)
    for split in ("TRAIN", "TEST"):
        (tmp_path / "a" / "X" / f"X_{split}.ts").write_text("@problemName X\n@data\n1,2,3:a\n")
    file = {"name": "X", "sha256": {"train": "0" * 64, "test": "0" * 64}}
    with pytest.raises(DataError, match="not the file the protocol names"):
        rerun_mod.whole_stores(file, [tmp_path / "empty", tmp_path / "a"], tmp_path / "stores")
    assert not (tmp_path / "stores" / "X" / "train.h5").exists()
    with pytest.raises(SystemExit, match="Y/Y_TRAIN.ts is in none of"):
        rerun_mod.whole_stores({"name": "Y"}, [tmp_path / "a"], tmp_path / "stores")


# ------------------------------------------------------------------------------------------------
# the stages with a stand-in compare

SPEC = {
    "protocol": "t/floors",
    "status": "frozen",
    "records": "unused",
    "files": {
        "development": [
            {"name": "A", "task": "classification"},
            {"name": "B", "task": "classification"},
            {"name": "R", "task": "regression"},
        ],
        "confirmation": [{"name": "C", "task": "classification"}],
    },
    "common_overrides": ["data.max_steps=0"],
    "candidates": [
        {"label": "nac", "group": ["neural", "nac"], "entry": "nac=nac/sequence"},
        {"label": "gru", "group": ["neural"], "entry": "gru=gru/sequence"},
        {"label": "minirocket", "group": ["fitted"], "entry": "minirocket=minirocket/sequence"},
    ],
    "references": [
        {"label": "1-NN ED", "entry": "1nn-ed=knn/sequence;model.distance=euclidean"},
        {"label": "training mean", "entry": "majority=majority/sequence"},
    ],
    "published": {"minirocket": {"mean_30_resamples": {"A": 0.9}}},
    "selection": SEL,
    "refit": {"neural": "mean epochs"},
    "train": {"epochs": 400, "threads": 1},
    "seeds": [0, 1, 2],
    "floors": [{"id": f"F{i}", "rule": "..."} for i in (1, 2, 3, 4)],
    "budget": {"cpu_hours": 10, "stop_cpu_hours": 12},
}
#: held-out (cv) and test scores of the stand-in: per file, label -> score (RMSE on R)
HELD = {
    "A": {"nac": 0.80, "gru": 0.70, "minirocket": 0.90},
    "B": {"nac": 0.60, "gru": 0.75, "minirocket": 0.70},
    "R": {"nac": 2.0, "gru": 1.0, "minirocket": 1.5},
    "C": {"nac": 0.9, "gru": 0.9, "minirocket": 0.5},  # nac and gru tie; gru's inner validation is better
}
TESTED = {
    "A": {"nac": 0.75, "minirocket": 0.91, "1-NN ED": 0.80},
    "B": {"gru": 0.70, "nac": 0.50, "minirocket": 0.6, "1-NN ED": 0.65},
    "R": {"gru": 1.2, "minirocket": 1.0, "training mean": 1.1},  # the chosen gru is worse than the mean: F4 not met
    "C": {"gru": 0.9, "nac": 0.7, "minirocket": 0.5, "1-NN ED": 0.8},
}
LABELS = {"nac": "nac", "gru": "gru", "minirocket": "minirocket", "1nn-ed": "1-NN ED", "majority": "training mean"}


def frozen_protocol(tmp_path, **changes):
    folder = tmp_path / "proto"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "floors.yaml"
    path.write_text(yaml.safe_dump({**SPEC, **changes}, sort_keys=False))
    if not (folder / ".git").exists():
        git(folder, "init", "-q")
    git(folder, "add", path.name)
    git(folder, "commit", "-q", "-m", "protocol")
    return protocols.load(path)


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    """compare_recorded replaced by a writer of records with the scores above; the stores by names."""
    calls = []

    def fake_compare(entries, folder, scale, *, overrides, seeds, epochs, protocol, **kwargs):
        file, job = folder.name.split("-", 1)
        cv = job.startswith("cv-")
        recs = []
        for e in entries:
            label = LABELS[verdicts.entry_label(e)]
            for s in seeds:
                score = (HELD if cv else TESTED)[file][label]
                fold_epochs = 100 + 10 * int(job[-1]) if cv else epochs  # folds 0-4: 100-140, mean 120
                recs.append(
                    {
                        "run": f"{label}-s{s}",
                        "preset": verdicts.entry_label(e),
                        "seed": s,
                        "epochs": 1 if label in ("minirocket", "1-NN ED", "training mean") else fold_epochs,
                        "sets": {HELD_OUT if cv else TEST: score},
                        "curve_rel_l2": [0.5 if label == "gru" else 0.4],
                        "wall_seconds": 36.0,
                        "threads": 1,
                    }
                )
        calls.append((file, job, [verdicts.entry_label(e) for e in entries], list(seeds), epochs, list(overrides)))
        write_store(folder, recs, protocol=protocol)

    monkeypatch.setattr(rerun_mod, "compare_recorded", fake_compare)
    monkeypatch.setattr(rerun_mod, "whole_stores", lambda f, a, s: {"TRAIN": s / "train.h5", "TEST": s / "test.h5"})
    monkeypatch.setattr(rerun_mod, "fold_stores", lambda p, f, t, r, k: (t.parent / "tr.h5", t.parent / "ho.h5", 4))
    return calls


def test_the_rerun_records_every_stage_and_refits_the_chosen_neural_candidates(tmp_path, stand_in):
    p = frozen_protocol(tmp_path)
    root = tmp_path / "records"
    assert rerun_mod.rerun(p, [], root, tmp_path / "stores", poll_seconds=0) == 0
    by_job = {(f, j): rest for f, j, *rest in stand_in}
    assert len([j for j in by_job if j[1].startswith("cv-")]) == 4 * 10
    labels, seeds, epochs, overrides = by_job[("A", "cv-r1-f3")]
    assert labels == ["nac", "gru", "minirocket"] and seeds == [0] and epochs == 400
    assert "data.shuffle=false" in overrides and "data.n_val=4" in overrides
    assert by_job[("A", "fit")][:3] == [["minirocket", "1nn-ed"], [0, 1, 2], 1]
    assert by_job[("R", "fit")][0] == ["minirocket", "majority"]
    # A: best minirocket (fitted, not refitted), best neural and NAC nac; B: gru best neural, nac NAC
    refits = sorted(j for j in by_job if j[1].startswith("refit-"))
    assert refits == [("A", "refit-nac"), ("B", "refit-gru"), ("B", "refit-nac"), ("C", "refit-gru"),
                      ("C", "refit-nac"), ("R", "refit-gru")]  # fmt: skip
    labels, seeds, epochs, overrides = by_job[("B", "refit-gru")]
    assert seeds == [0, 1, 2] and epochs == 120 and "train.early_stop=0" in overrides and "data.n_val=0" in overrides
    c = verdicts.selection(p, p.files("confirmation")[0], root)
    assert c.ranked[:2] == ["gru", "nac"] and c.nac == "nac"  # the tie goes to the better inner validation
    r = verdicts.selection(p, p.files()[2], root)
    assert r.best == "gru" and not r.higher
    dev = {res.verdict.floor: res.verdict for res in verdicts.floors(p, "development", root)}
    assert {k: v.text for k, v in dev.items()} == {"F1": "met", "F2": "not met", "F3": "met", "F4": "not met"}
    conf = {res.verdict.floor: res.verdict for res in verdicts.floors(p, "confirmation", root)}
    assert conf["F1"].text == "met" and conf["F2"].text == "not met" and conf["F3"].text == "not computed"
    assert conf["F4"].text == "not computed"  # no regression file among the confirmation files
    text = verdicts.report(p, root)
    assert "Cross-validation and fit jobs recorded: 44 of 44" in text and "| F2 | not met |" in text


def test_a_missing_record_or_an_edited_protocol_makes_the_floors_exploratory(tmp_path, stand_in):
    p = frozen_protocol(tmp_path)
    root = tmp_path / "records"
    rerun_mod.rerun(p, [], root, tmp_path / "stores", poll_seconds=0)
    (root / "A-refit-nac" / "results.json").unlink()  # NAC's test on A: F2 cannot be computed, F1 can
    f1, f2 = (res.verdict for res in verdicts.floors(p, "development", root)[:2])
    assert f1.text == "exploratory (floor reached)" and "incomplete: A-refit-nac" in f1.reasons
    assert f2.text == "not computed"
    edited = frozen_protocol(tmp_path, seeds=[0, 1])  # the rules changed after the records were written
    rerun_mod.rerun(edited, [], root, tmp_path / "stores", poll_seconds=0)
    f1 = verdicts.floors(edited, "development", root)[0].verdict
    assert f1.status == protocols.EXPLORATORY and any("another version" in r for r in f1.reasons)


def test_the_rerun_starts_nothing_at_the_stop_or_under_a_draft(tmp_path, stand_in):
    p = frozen_protocol(tmp_path, budget={"cpu_hours": 10, "stop_cpu_hours": 0.05})
    root = tmp_path / "records"
    assert rerun_mod.rerun(p, [], root, tmp_path / "stores", poll_seconds=0) == 3
    assert len(stand_in) == 2  # 2 jobs x 3 entries x 36 s = 0.06 h >= 0.05 h
    assert verdicts.cpu_hours(root) == pytest.approx(0.06)
    assert "Cross-validation and fit jobs recorded: 2 of 44" in verdicts.report(p, root)
    draft = frozen_protocol(tmp_path / "d", status="draft")
    with pytest.raises(DataError, match="draft"):
        rerun_mod.rerun(draft, [], tmp_path / "d" / "records", tmp_path / "stores", poll_seconds=0)


def test_ranking_breaks_ties_by_inner_validation_then_the_listed_order():
    order = ["a", "b", "c"]
    scores = {"a": (0.8, 0.5, 10), "b": (0.8 + 1e-12, 0.6, 10), "c": (0.9, float("nan"), 10)}
    assert verdicts.rank(scores, order, higher=True) == ["c", "b", "a"]
    assert verdicts.rank({k: (0.8, 0.5, 10) for k in order}, order, higher=True) == order
    rmse = {"a": (1.0, 2.0, 10), "b": (1.0, 1.0, 10), "c": (0.5, 9.0, 10)}
    assert verdicts.rank(rmse, order, higher=False) == ["c", "b", "a"]


def test_the_jobs_are_one_folder_per_fold_and_file(tmp_path):
    p = frozen_protocol(tmp_path)
    folders = [j.folder for j in jobs(p)]
    assert len(folders) == len(set(folders)) == 4 * 11 and folders[0] == "A-cv-r0-f0" and folders[10] == "A-fit"
    assert Job("A", "refit", label="nac").folder == "A-refit-nac"
    json.dumps([list(j) for j in jobs(p)])  # plain values


def test_a_fold_without_a_score_ranks_its_candidate_last():
    assert np.isnan(verdicts.fold_mean([0.9, None, 0.8], strict=True))
    assert verdicts.fold_mean([0.9, None, 0.8]) == pytest.approx(0.85)
    scores = {"a": (verdicts.fold_mean([0.9, float("nan")], strict=True), 0.1, 2), "b": (0.2, 0.1, 2)}
    assert verdicts.rank(scores, ["a", "b"], higher=True) == ["b", "a"]
    assert verdicts.rank(scores, ["a", "b"], higher=False) == ["b", "a"]
