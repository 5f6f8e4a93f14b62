"""The pre-registered UEA/UCR rerun as its report and pages state it, recomputed from its records by the tests' own
code (uea_floors_rules.py, never the rerun's driver): the jobs recorded and the CPU-hours, every file's ranking and
choices, and no verdict before the plan is complete (that every record carries the protocol's hash as the file is now
is test_uea_floors.py's). A record added without the report and the pages regenerated, or a ranking rule changed in
the driver, fails here. Only reads records (no training)."""

import json
import math
import re

import pytest
import uea_floors_rules as rules

PAGE = rules.LAB / "pages" / "nac.md"
SUMMARY = rules.LAB / "RESULTS.md"
REPORT = rules.RECORDS / "report.md"
HEADING = "### The pre-registered rerun"


def section() -> str:
    text = PAGE.read_text()
    start = text.index(HEADING)
    end = text.index("\n### ", start + 1)
    return text[start:end]


def fmt(value: float) -> str:
    return "—" if value != value else f"{value:.3f}"


def report_tables() -> dict[str, list[tuple[str, str, str, int]]]:
    """file -> its ranking rows in report.md (candidate, held-out, inner validation, folds)."""
    out, name = {}, None
    for line in REPORT.read_text().splitlines():
        heading = re.match(r"## (\S+) \((classification|regression)", line)
        if heading:
            name = heading.group(1)
        row = re.match(r"\| (\d+) \| (\S+) \| (\S+) \| (\S+) \| (\d+) \|$", line)
        if name and row:
            out.setdefault(name, []).append((row.group(2), row.group(3), row.group(4), int(row.group(5))))
    return out


def test_the_report_counts_the_jobs_and_cpu_hours_the_records_hold():
    done, total = rules.jobs_recorded()
    text = REPORT.read_text()
    assert f"Cross-validation and fit jobs recorded: {done} of {total};" in text
    assert f"CPU-hours recorded {rules.cpu_hours():.2f} " in text


def test_the_reports_rankings_and_choices_are_the_protocols_rule_applied_to_the_records():
    tables, report = report_tables(), REPORT.read_text()
    for f in rules.files():
        sel = rules.selection(f)
        if sel is None:
            assert f["name"] not in tables, f"{f['name']}: ranked before its folds are all recorded"
            continue
        want = [(label, fmt(score), fmt(inner), n) for label, score, inner, n in sel["ranked"]]
        assert tables[f["name"]] == want, f["name"]
        chosen = f"Chosen: best {sel['best']}"
        if sel["best neural"]:
            chosen += f", best neural {sel['best neural']}, NAC {sel['NAC']}"
        assert chosen in report, f["name"]


def test_the_nac_page_states_the_progress_and_choices_the_records_hold():
    page = section()
    text = " ".join(page.split())
    done, total = rules.jobs_recorded()
    assert f"{done} of the plan's {total} cross-validation and fit jobs recorded" in text
    assert f"{rules.cpu_hours():.2f} CPU-hours" in text
    for f in rules.files():
        sel = rules.selection(f)
        line = next((row for row in page.splitlines() if row.startswith(f"| {f['name']} |")), None)
        if sel is None:
            assert line is None, f"{f['name']}: a choice on the page before its selection is complete"
            continue
        assert line is not None, f"{f['name']}: its selection is complete but not on the page"
        scores = {label: score for label, score, _, _ in sel["ranked"]}
        for choice in ("best", "best neural", "NAC"):
            label = sel[choice]
            if label is not None:
                assert f"{label} {fmt(scores[label])}" in line, (f["name"], choice)


@pytest.mark.parametrize("role", ["development", "confirmation"])
def test_a_verdict_only_on_the_complete_plan_and_as_the_records_give_it(role):
    """While a run is missing the page says the rerun is running and gives no verdict; once the plan is complete
    each floor's verdict is on the page as ``F1 (development): met`` (or ``not met``), recomputed here."""
    verdicts = rules.floors(role)
    text = " ".join(section().split())
    summary = next(line for line in SUMMARY.read_text().splitlines() if "uea_floors.yaml" in line)
    if verdicts is None:
        assert not re.search(rf"F\d \({role}\): (met|not met)", text)
        assert "No verdict is given here until every run of the plan is recorded" in text
        assert "running" in summary
        return
    for floor, reached in verdicts.items():
        assert f"{floor} ({role}): {'met' if reached else 'not met'}" in text, floor
    assert "running" not in summary
    assert rules.verdict_text(role, verdicts) in summary


def test_the_verdicts_test_scores_on_the_page_are_the_records():
    """The verdict tables of the nac.md section: every file's reference, chosen candidates and yes / no, from the
    fit and refit records (mean over seeds), and the one refit seed the page quotes."""
    if rules.floors("development") is None or rules.floors("confirmation") is None:
        pytest.skip("the plan is not complete: no verdict table yet")
    page = section()
    verdicts = page[page.index("#### The verdicts") :]
    rows = {r.split("|")[1].strip(): r for r in verdicts.splitlines() if r.startswith("| ")}
    for role in ("development", "confirmation"):
        for f in rules.files(role):
            sel, t = rules.selection(f), rules.test_means(f)
            cells = [c.strip() for c in rows[f["name"]].strip().strip("|").split("|")]
            if f["task"] == "regression":
                best, mean = t[sel["best"]], t["training mean"]
                want = [f["name"], role, f"{mean:.5f}", f"{sel['best']} {best:.5f}", "yes" if best <= mean else "no"]
            else:
                nn = t["1-NN ED"]
                want = [f["name"], role, f"{nn:.3f}"]
                for choice in ("best", "best neural", "NAC"):
                    label = sel[choice]
                    want.append(f"{label} {t[label]:.3f}")
                    if choice != "best neural":
                        want.append("yes" if t[label] >= nn else "no")
            assert cells == want, f["name"]
    seeds = sorted(rules.runs("ItalyPowerDemand-refit-cfc"), key=lambda r: r["seed"])
    quoted = " / ".join(f"{r['set_metrics']['test']['accuracy']:.3f}" for r in seeds)
    assert f"Its seeds 0, 1, 2: {quoted}." in " ".join(page.split())


# ------------------------------------------------------------------------------------------------
# the rules code and the rerun's driver on a complete plan of made-up records


def _run(label, seed, key, store, value, inner=None, epochs=50):
    return {
        "run": f"{label}-s{seed}",
        "preset": label,
        "seed": seed,
        "sets": {store: value},
        "set_metrics": {store: {key: value}},
        "curve_rel_l2": [] if inner is None else [0.5, inner],
        "epochs": epochs,
        "wall_seconds": 10.0,
        "threads": 1,
        "protocol": {"name": "time_series/uea_floors", "sha256": rules.sha256()},
    }


def _write(root, folder, recs):
    (root / folder).mkdir(parents=True, exist_ok=True)
    (root / folder / "results.json").write_text(json.dumps(recs))


#: per development file: held-out fold scores that decide the selection (every other candidate scores 0.5, or an RMSE
#: of 1.0), the inner validation where it breaks a tie, and the test scores of what is chosen
DESIGN = {
    # multirocket best (fitted: no refit); NAC nac-paper at 0.92 against 1-NN's 0.90
    "BasicMotions": {"held": {"multirocket": 0.99, "nac-paper": 0.9}, "test": {"nac-paper": 0.92}},
    # gru-conv and lstm tie on the folds; lstm's inner validation is higher: lstm is best, 0.85 < 0.90 (F1 fails)
    "GunPoint": {
        "held": {"gru-conv": 0.95, "lstm": 0.95, "nac-conv": 0.9},
        "inner": {"gru-conv": 0.9, "lstm": 0.95},
        "test": {"lstm": 0.85, "nac-conv": 0.95},
    },
    # nac-conv would be best but one fold is NaN: it ranks last; nac-tuned is best and NAC
    "ItalyPowerDemand": {
        "held": {"nac-conv": 0.99, "nac-tuned": 0.95},
        "nan": "nac-conv",
        "test": {"nac-tuned": 0.91},
    },
    # NAC (nac-conv) below 1-NN: the one file of five F2 allows
    "ArrowHead": {"held": {"hydra": 0.9, "nac-conv": 0.8}, "test": {"nac-conv": 0.85}},
    "JapaneseVowels": {"held": {"nac-paper": 0.97}, "test": {"nac-paper": 0.95}},
    # regression: minirocket's RMSE lowest on the folds, 0.040 on test against the training mean's 0.045
    "Covid3Month": {"held": {"minirocket": 0.2}},
}


def _complete_plan(root):
    spec = rules.spec()
    published = spec["published"]
    labels = [c["label"] for c in rules.candidates()]
    fitted = [c["label"] for c in rules.candidates() if "fitted" in c["group"]]
    for f in rules.files():
        name, cls = f["name"], f["task"] == "classification"
        key = rules.metric(f["task"])
        default = {"held": {"nac-conv": 0.9}, "test": {"nac-conv": 0.95}} if cls else {"held": {"gru-conv": 0.2}}
        design = DESIGN.get(name, default)
        filler = 0.5 if cls else 1.0
        for i, folder in enumerate(rules.cv_folders(name)):
            recs = []
            for label in labels:
                value = design["held"].get(label, filler)
                if design.get("nan") == label and i == 3:
                    value = math.nan
                recs.append(_run(label, 0, key, "heldout", value, design.get("inner", {}).get(label, 0.5)))
            _write(root, folder, recs)
        fits = []
        for seed in spec["seeds"]:
            for label in fitted:
                pub = (published.get(label, {}).get("mean_30_resamples") or {}).get(name)
                off = 0.03 if (label, name) == ("hydra", "ArrowHead") else 0.01
                value = (pub + off) if pub is not None else (0.95 if cls else 0.04)
                fits.append(_run(label, seed, key, "test", value))
            fits.append(_run("1nn-ed" if cls else "majority", seed, key, "test", 0.9 if cls else 0.045))
        _write(root, f"{name}-fit", fits)
        sel = rules.selection(f)
        for label in rules.refit_labels(sel):
            value = design.get("test", {}).get(label, 0.95 if cls else 0.04)
            _write(root, f"{name}-refit-{label}", [_run(label, s, key, "test", value) for s in spec["seeds"]])


def test_the_rules_and_the_driver_agree_on_a_complete_plan(tmp_path, monkeypatch):
    """Made-up records of the whole plan with known outcomes: a tie broken by the inner validation, a NaN fold, a
    refit below 1-NN, a fitted baseline 3 points off its published mean. The tests' rules give the floors the design
    says, and the rerun's driver (its own code) gives the same."""
    from neurodyn_lab import protocols
    from neurodyn_lab.time_series import uea_floors as driver
    from neurodyn_lab.time_series import uea_floors_verdicts as verdicts

    monkeypatch.setattr(rules, "RECORDS", tmp_path)
    _complete_plan(tmp_path)
    by_name = {f["name"]: f for f in rules.files()}
    assert rules.selection(by_name["GunPoint"])["best"] == "lstm"
    assert rules.selection(by_name["ItalyPowerDemand"])["ranked"][-1][0] == "nac-conv"
    assert rules.selection(by_name["BasicMotions"])["best"] == "multirocket"
    assert rules.jobs_recorded() == (99, 99)
    ours = {"development": rules.floors("development"), "confirmation": rules.floors("confirmation")}
    assert ours["development"] == {"F1": False, "F2": True, "F3": False, "F4": True}
    assert ours["confirmation"] == {"F1": True, "F2": True, "F4": True}
    protocol = protocols.load(driver.PROTOCOL)
    for role, want in ours.items():
        theirs = {r.verdict.floor: r.verdict.reached for r in verdicts.floors(protocol, role, tmp_path)}
        assert {k: v for k, v in theirs.items() if v is not None} == want, role
