"""The UEA/UCR evidence report (neurodyn_lab.time_series.uea): every choice it prints is made on validation, never on
the test file, and the floors table says yes / no from the recorded numbers. Records are written here by hand (no
training)."""

import argparse
import json
from pathlib import Path

from neurodyn_lab.time_series import uea


def rec(preset: str, seed: int, val: list[float], test: float, **metrics) -> dict:
    """A compare record as ``neurodyn.compare`` writes it: the validation curve and the one test file's metric."""
    return {
        "preset": preset,
        "seed": seed,
        "curve_rel_l2": val,
        "sets": {"TEST.h5": test},
        "epochs": 10,
        "seconds_per_epoch": 0.1,
        "set_metrics": {"TEST.h5": {"rmse": test, **metrics}},
    }


def test_choice_is_made_on_validation_not_on_test():
    records = [rec("a", s, [0.5, 0.9], 0.70) for s in (0, 1)] + [rec("b", s, [0.6, 0.8], 0.99) for s in (0, 1)]
    assert uea.chosen_on_validation(records, ["a", "b"], higher=True) == "a"  # b's higher test does not count
    # the final model (the one tested) validates 0.9 in b, 0.7 in a: a's luckier best evaluation (1.0) does not count
    assert (
        uea.chosen_on_validation([rec("a", 0, [1.0, 0.7], 0.5), rec("b", 0, [0.9, 0.9], 0.5)], ["a", "b"], higher=True)
        == "b"
    )
    # equal final validation: the best one breaks the tie, then the order listed
    tied = [rec("a", 0, [0.7, 0.9], 0.5), rec("b", 0, [0.95, 0.9], 0.4)]
    assert uea.chosen_on_validation(tied, ["a", "b"], higher=True) == "b"
    same = [rec("a", 0, [0.9], 0.5), rec("b", 0, [0.9], 0.6)]
    assert uea.chosen_on_validation(same, ["a", "b"], higher=True) == "a"
    assert uea.chosen_on_validation(same, ["b", "a"], higher=True) == "b"
    # RMSE: the lower validation wins
    reg = [rec("a", 0, [3.0, 2.0], 9.0), rec("b", 0, [2.5, 2.4], 1.0)]
    assert uea.chosen_on_validation(reg, ["a", "b"], higher=False) == "a"
    assert uea.chosen_on_validation(reg, ["c"], higher=True) is None


def _write(tmp_path: Path, dataset: str, records: list[dict], budget: str = "400ep") -> argparse.Namespace:
    args = argparse.Namespace(
        out=str(tmp_path / "report"),
        tag="t",
        stores=str(tmp_path / "no-stores"),
        datasets=[dataset],
        variants=["regular"],
        epochs=400,
        budget="",
    )
    folder = uea.store(args, dataset, "regular", budget)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(records))
    return args


def test_floors_row_compares_the_validation_choices_with_one_nn(tmp_path):
    records = [
        rec("nac-paper", 0, [0.7], 0.80),
        rec("nac-tuned", 0, [0.9], 0.85),  # NAC: tuned chosen, below 1-NN
        rec("gru/sequence", 0, [0.95], 0.93),
        rec("lstm/sequence", 0, [0.5], 1.00),  # GRU chosen, not LSTM
        rec("knn/sequence", 0, [0.8], 0.90),
        rec("minirocket/sequence", 0, [0.92], 0.97),
    ]
    args = _write(tmp_path, "GunPoint", records)
    lines = uea.floors_table(args, "400ep")
    row = next(line for line in lines if line.startswith("| GunPoint"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "0.900 (harness 1-NN)"  # no store here: the harness's 1-NN record
    assert cells[2] == "gru/sequence: 0.930" and cells[3] == "yes"  # GRU's validation beats MiniRocket's too
    assert cells[4] == "gru/sequence: 0.930" and cells[5] == "yes"
    assert cells[6] == "nac-tuned: 0.850" and cells[7] == "no"
    assert cells[8] == "0.970 vs 0.992: yes"  # published MiniRocket on GunPoint
    counts = next(line for line in lines if line.startswith("Counts"))
    assert (
        "1-NN on 1 of 1; best neural model on 1 of 1; NAC on 0 of 1; MiniRocket within 3 points of the published "
        "accuracy on 1 of 1"
    ) in counts


def test_best_model_and_best_neural_model_differ_when_a_baseline_validates_best(tmp_path):
    records = [
        rec("gru/sequence", 0, [0.8], 0.85),
        rec("minirocket/sequence", 0, [0.9], 0.95),
        rec("knn/sequence", 0, [0.7], 0.90),
    ]
    row = next(
        line
        for line in uea.floors_table(_write(tmp_path, "GunPoint", records), "400ep")
        if line.startswith("| GunPoint")
    )
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:6] == ["minirocket/sequence: 0.950", "yes", "gru/sequence: 0.850", "no"]


def test_floors_row_of_a_regression_file_against_the_training_mean(tmp_path):
    records = [
        rec("majority/sequence", 0, [12.0], 12.9),
        rec("gru/sequence", 0, [10.0], 11.5, r2=0.21),
        rec("mha/sequence", 0, [11.0], 2.0, r2=0.9),
    ]
    args = _write(tmp_path, "Covid3Month", records)
    row = next(line for line in uea.floors_table(args, "400ep") if line.startswith("| Covid3Month"))
    assert "training mean 12.90000" in row and "gru/sequence: 11.50000, R^2 0.210" in row and "| yes |" in row
    # RMSE to five decimals: a model 0.00007 above the training mean is not printed as equal to it
    close = [rec("majority/sequence", 0, [0.040], 0.04472), rec("gru/sequence", 0, [0.036], 0.04479)]
    row = next(
        line
        for line in uea.floors_table(_write(tmp_path, "Covid3Month", close), "400ep")
        if line.startswith("| Covid3Month")
    )
    assert "training mean 0.04472 | gru/sequence: 0.04479" in row and "| no |" in row


def test_minirocket_floor_uses_the_whole_train_fit_when_recorded(tmp_path):
    """The published MiniRocket trains on every training case: where the whole-train records exist the floor
    compares them (0.86 within 3 points of ArrowHead's 0.881), not the comparison's fit on 80 % (0.80, outside)."""
    records = [
        rec("gru/sequence", 0, [0.8], 0.85),
        rec("minirocket/sequence", 0, [0.9], 0.80),
        rec("knn/sequence", 0, [0.7], 0.78),
    ]
    args = _write(tmp_path, "ArrowHead", records)
    row = next(line for line in uea.floors_table(args, "400ep") if line.startswith("| ArrowHead"))
    assert row.rstrip(" |").endswith("0.800 vs 0.881: no")
    whole = uea.store(args, "ArrowHead", "regular", uea.WHOLE)
    whole.mkdir(parents=True)
    (whole / "results.json").write_text(
        json.dumps([rec("minirocket/sequence", s, [], v) for s, v in ((0, 0.85), (1, 0.87))])
    )
    lines = uea.floors_table(args, "400ep")
    row = next(line for line in lines if line.startswith("| ArrowHead"))
    assert row.rstrip(" |").endswith("0.860 (whole train file) vs 0.881: yes")
    assert "within 3 points of the published accuracy on 1 of 1" in next(x for x in lines if x.startswith("Counts"))
    # the whole-train fits never take part in a choice: the best model on validation is still the comparison's
    assert "| minirocket/sequence: 0.800 |" in row


def test_one_nn_reference_of_an_unequal_length_file_is_the_whole_train_fit(tmp_path):
    records = [rec("gru/sequence", 0, [0.9], 0.955), rec("knn/sequence", 0, [0.95], 0.954)]
    args = _write(tmp_path, "JapaneseVowels", records)
    whole = uea.store(args, "JapaneseVowels", "regular", uea.WHOLE)
    whole.mkdir(parents=True)
    (whole / "results.json").write_text(json.dumps([rec("knn/sequence", 0, [], 0.96)]))
    row = next(line for line in uea.floors_table(args, "400ep") if line.startswith("| JapaneseVowels"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "0.960 (harness 1-NN, whole train file)"
    assert cells[2:4] == ["knn/sequence: 0.954", "no"]  # validation chose the 80 % 1-NN; below the reference


def test_recorded_one_nn_of_the_stores_is_the_reference_without_the_stores(tmp_path):
    records = [rec("gru/sequence", 0, [0.9], 0.92), rec("knn/sequence", 0, [0.8], 0.90)]
    args = _write(tmp_path, "GunPoint", records)
    whole = uea.store(args, "GunPoint", "regular", uea.WHOLE)
    whole.mkdir(parents=True)
    (whole / uea.ONE_NN_RECORD).write_text(json.dumps({"accuracy": 0.93}))
    row = next(line for line in uea.floors_table(args, "400ep") if line.startswith("| GunPoint"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "0.930" and cells[2:4] == ["gru/sequence: 0.920", "no"]


def test_choice_on_several_validation_draws_averages_them():
    # draw 0 alone prefers a (0.9 vs 0.8); over three draws b is better on average (0.9 vs 0.7)
    draws = [
        [rec("a", 0, [0.9], 0.5), rec("b", 0, [0.8], 0.5)],
        [rec("a", 0, [0.6], 0.5), rec("b", 0, [0.9], 0.5)],
        [rec("a", 0, [0.6], 0.5), rec("b", 0, [1.0], 0.5)],
    ]
    assert uea.chosen_on_validation(draws[0], ["a", "b"], higher=True) == "a"
    assert uea.chosen_on_draws(draws, ["a", "b"], higher=True) == "b"
    # a label missing from one draw does not take part
    assert uea.chosen_on_draws([draws[0], [rec("a", 0, [0.1], 0.5)]], ["a", "b"], higher=True) == "a"
    assert uea.chosen_on_draws([[rec("a", 0, [2.0], 0.5)], [rec("a", 0, [3.0], 0.5)]], ["a"], higher=False) == "a"


def test_floors_on_draws_choose_on_every_split_and_wait_for_all(tmp_path):
    main = (
        [rec("gru/sequence", s, [0.95], 0.85) for s in (0, 1)]
        + [rec("minirocket/sequence", s, [0.90], 0.99) for s in (0, 1)]
        + [rec("knn/sequence", 0, [0.9], 0.91)]
    )
    args = _write(tmp_path, "GunPoint", main)
    one = next(line for line in uea.floors_table(args, "400ep") if line.startswith("| GunPoint"))
    assert "| gru/sequence: 0.850 | no |" in one  # one split: GRU validates best
    assert uea.floors_table(args, "400ep", draws=[1, 2]) == []  # no draw recorded yet: no row
    for k, gru, rocket in ((1, 0.70, 0.95), (2, 0.75, 0.95)):
        folder = uea.store(args, "GunPoint", "regular", uea.draw_budget("400ep", k))
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "results.json").write_text(
            json.dumps(
                [
                    rec("gru/sequence", 0, [gru], 0.1),
                    rec("minirocket/sequence", 0, [rocket], 0.1),
                    rec("knn/sequence", 0, [0.9], 0.1),
                ]
            )
        )
        if k == 1:  # draw 2 not recorded yet, then draw 2 holding some models only: still no row
            assert uea.floors_table(args, "400ep", draws=[1, 2]) == []
            partial = uea.store(args, "GunPoint", "regular", uea.draw_budget("400ep", 2))
            partial.mkdir(parents=True)
            (partial / "results.json").write_text(json.dumps([rec("gru/sequence", 0, [0.75], 0.1)]))
            assert uea.floors_table(args, "400ep", draws=[1, 2]) == []
    lines = uea.floors_table(args, "400ep", draws=[1, 2])
    row = next(line for line in lines if line.startswith("| GunPoint"))
    # mean validation over the three splits: GRU 0.80, MiniRocket 0.93: MiniRocket chosen, scored on the main test
    assert "| minirocket/sequence: 0.990 | yes |" in row and "| gru/sequence: 0.850 | no |" in row
    assert "chosen on 3 validation splits" in lines[0]


def test_best_epoch_is_the_first_best_evaluation_and_refit_epochs_average_them():
    # evaluated every 5 epochs (4 evaluations in 20 epochs): the first of the equal bests is the 2nd, epoch 10
    run = dict(rec("a", 0, [0.5, 0.9, 0.9, 0.7], 0.5), epochs=20)
    assert uea.best_epoch(run, higher=True) == 10
    assert uea.best_epoch(dict(run, curve_rel_l2=[3.0, 2.0, 2.5, 1.0]), higher=False) == 20  # RMSE: the lowest
    # early stopping after 3 evaluations at an interval of 10: the best (1st) is epoch 10
    assert uea.best_epoch(dict(rec("a", 0, [0.9, 0.8, 0.8], 0.5), epochs=30), higher=True) == 10
    splits = [[run, dict(rec("b", 0, [0.1], 0.5), epochs=400)], [dict(run, curve_rel_l2=[1.0, 0.5, 0.5, 0.5])]]
    assert uea.refit_epochs(splits, "a", higher=True) == round((10 + 5) / 2)  # the other label's runs do not count
    assert uea.refit_epochs(splits, "a", higher=True, rule="trained") == 20  # the epochs the runs trained


def _refits(args, dataset, records, budget):
    folder = uea.store(args, dataset, "regular", budget)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(records))


def test_refit_floors_score_the_chosen_presets_refitted_for_the_epochs_validation_found(tmp_path):
    main = [dict(rec("gru/sequence", s, [0.8, 0.95], 0.85), epochs=20) for s in (0, 1)] + [
        rec("knn/sequence", 0, [0.9], 0.88),
        rec("minirocket/sequence", 0, [0.9], 0.97),
    ]
    args = _write(tmp_path, "GunPoint", main)
    assert uea.floors_table(args, "400ep", draws=[], refit="best") == []  # nothing refitted yet: no row
    # the gru runs peaked at their last evaluation, epoch 20: a refit of another length is not the chosen one
    _refits(args, "GunPoint", [dict(rec("gru/sequence", 0, [], 0.99), budget="30ep")], uea.REFIT)
    assert uea.floors_table(args, "400ep", draws=[], refit="best") == []
    _refits(
        args,
        "GunPoint",
        [dict(rec("gru/sequence", s, [], t), budget="20ep") for s, t in ((0, 0.92), (1, 0.94))]
        + [dict(rec("gru/sequence", 0, [], 0.10), budget="30ep")],
        uea.REFIT,
    )
    _refits(args, "GunPoint", [rec("knn/sequence", 0, [], 0.913), rec("minirocket/sequence", 0, [], 0.99)], uea.WHOLE)
    lines = uea.floors_table(args, "400ep", draws=[], refit="best")
    row = next(line for line in lines if line.startswith("| GunPoint"))
    # GRU validates best (0.95); refitted for 20 epochs it scores 0.930 on the test file, above the 1-NN of 0.913
    assert "| gru/sequence: 0.930 | yes | gru/sequence: 0.930 | yes |" in row
    assert "refitted on the whole train file" in lines[0]
    # without refit the same choice reads the comparison's own test numbers
    assert "| gru/sequence: 0.850 | no |" in next(
        line for line in uea.floors_table(args, "400ep") if line.startswith("| GunPoint")
    )


def test_refit_floors_of_a_regression_file_use_the_whole_file_training_mean(tmp_path):
    main = [dict(rec("gru/sequence", 0, [0.05, 0.04], 0.047), epochs=10), rec("majority/sequence", 0, [0.05], 0.045)]
    args = _write(tmp_path, "Covid3Month", main)
    _refits(
        args,
        "Covid3Month",
        [
            dict(rec("gru/sequence", 0, [], 0.043, r2=0.1), budget="10ep"),
            dict(rec("majority/sequence", 0, [], 0.0447), budget="1ep"),
        ],
        uea.REFIT,
    )
    row = next(line for line in uea.floors_table(args, "400ep", draws=[], refit="best") if line.startswith("| Cov"))
    assert "training mean 0.04470 | gru/sequence: 0.04300, R^2 0.100 | yes |" in row


def test_front_end_table_reads_validation_only_and_counts_the_runs(tmp_path):
    args = argparse.Namespace(out=str(tmp_path / "report"), tag="t")
    assert uea.front_end_table(args) == []  # nothing recorded
    for k, (bn, plain) in enumerate(((1.0, 0.8), (0.9, 0.9))):
        folder = uea._front_end_folder(args, "GunPoint", k)
        folder.mkdir(parents=True)
        # the test scores (0.1 / 0.99) would choose the other way
        (folder / "results.json").write_text(
            json.dumps([rec("nac-batchnorm", 0, [0.5, bn], 0.1), rec("nac-plain", 0, [plain, 0.5], 0.99)])
        )
    lines = uea.front_end_table(args)
    row = {line.split("|")[2].strip(): line for line in lines if line.startswith("| nac")}
    assert "| 0.950 / 0.950 (2) | - | - | 0.950 / 0.950 |" in row["batchnorm"]
    assert "| 0.500 / 0.850 (2) | - | - | 0.500 / 0.850 |" in row["plain"]  # the final model's, then the best
    assert "batchnorm 0.950, plain 0.500; highest: batchnorm" in lines[-2]
    assert "0.99" not in "\n".join(lines)


def test_every_compared_entry_keeps_the_label_its_records_hold():
    # the GRU entry pins the front end of before 29 Nov; its records are labelled by the bare preset, as compare does
    labels = [uea._label(e) for e in uea.MODELS]
    assert labels[:3] == ["nac-paper", "nac-tuned", "gru/sequence"] and "nac-conv" in labels
    assert len(set(labels)) == len(labels)
    for dataset in uea.DATASETS:  # the recorded labels are those of the driver's entries
        store = uea.OUT / f"{dataset}-regular-400ep" / "results.json"
        recorded = {r["preset"] for r in json.loads(store.read_text())}
        assert recorded == set(labels)
