"""`make bench` keeps working: the benchmark's CPU smoke runs every section and reports."""
import json
import subprocess
import sys

import pytest

from tests.conftest import REPO


def test_quick_benchmark_runs_every_section_on_cpu(upstream, tmp_path):
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "run.py"), "--quick", "--site",
         str(upstream["site"]), "--records", str(upstream["records"]), "--out", str(tmp_path),
         "--tag", "ci"], capture_output=True, text=True, timeout=300, cwd=str(REPO))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads((tmp_path / "ci.json").read_text())
    table = (tmp_path / "ci.md").read_text()
    assert "## Targets" in table and "(a) Adapter cost per env step" in table
    sections = result["sections"]
    assert set(sections) >= {"adapters", "memory", "profile", "train", "startup"}
    for size in sections["adapters"]["sizes"].values():
        for variant in ("seed", "harl", "openrl"):
            assert size["step_ms"][variant]["median"] > 0, variant
    runs = sections["train"]["runs"]
    assert {r["algo"] for r in runs} == {"happo", "ppo"}
    assert all(r["exit"] == 0 and r["env_steps"] > 0 for r in runs)


def test_the_rollout_benchmark_times_20_iterations_after_10_of_warm_up(tmp_path, capsys):
    """The rollout benchmark's statistics: the median and interquartile range of what follows
    the warm-up, and a refusal of a run too short to give 20 timed iterations."""
    from benchmarks import rollout_non_physics

    values = [100.0] * 10 + [float(v) for v in range(1, 21)]  # warm-up, then 1..20
    median, iqr = rollout_non_physics.summary(values, 10)
    assert median == 10.5 and iqr == pytest.approx(15.75 - 5.25)
    with pytest.raises(SystemExit) as stop:
        rollout_non_physics.main(["--site", "s", "--pristine-site", "p", "--records", "r",
                                  "--out", str(tmp_path / "out.json"), "--iterations", "30"])
    assert stop.value.code == 2 and "fewer than 20 timed" in capsys.readouterr().err


def test_the_learning_curves_are_drawn_from_the_records_with_the_resume_marked(tmp_path,
                                                                                monkeypatch):
    """benchmarks/learning_plot.py draws each learning.py record's success curve (#48); a
    resume, where the success window starts empty, is marked; no record is one error line."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    from benchmarks import learning_plot

    drawn = []
    original = pyplot.subplots

    def spy(*args, **kwargs):
        fig, ax = original(*args, **kwargs)
        drawn.append(ax)
        return fig, ax

    records = sorted((REPO / "benchmarks" / "results").glob("learning-*.json"))
    assert len(records) >= 3
    pyplot.subplots = spy
    try:
        assert learning_plot.main([str(p) for p in records] + ["--out",
                                                                str(tmp_path / "l.png")]) == 0
    finally:
        pyplot.subplots = original
    assert (tmp_path / "l.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ax = drawn[0]
    labels = [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]
    assert sorted(labels) == ["HAPPO, the authors' config (500 envs)",
                              "PPO, task/cuboid/config.py (500 envs)",
                              "PPO, the authors' config (500 envs)",
                              "PPO, the authors' config (500 envs, Go1 drive bounded)"]
    ppo = next(line for line in ax.get_lines()
               if line.get_label() == "PPO, the authors' config (500 envs)")
    assert max(ppo.get_ydata()) > 0.2 and ppo.get_ydata()[0] == 0  # it learns, from 0
    assert [t.get_text() for t in ax.texts] == ["resumed: its first few episodes"]
    monkeypatch.setattr(learning_plot, "RESULTS", tmp_path)  # no records: one line, exit 2
    assert learning_plot.main(["--out", str(tmp_path / "x.png")]) == 2
    assert not (tmp_path / "x.png").exists()


def refused(capsys, summarise, runs):
    """A summary's refusal of bad input: exit 2 and one ``error:`` line; the line."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        summarise(runs)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    return err


def progress_run(folder, fps):
    """A run folder whose progress.txt logs one update of 100,000 env steps per ``fps``."""
    folder.mkdir()
    (folder / "progress.txt").write_text("steps,success_rate,steps_per_s\n" + "".join(
        "%d,,%s\n" % (100000 * (i + 1), v) for i, v in enumerate(fps)))
    return folder


def test_the_end_to_end_summary_pairs_the_alternated_runs_and_leaves_out_each_first_update(
        tmp_path, capsys):
    """benchmarks/e2e_summary.py (#49): a run's median leaves its first update out; the pairs
    are the call's order two by two, each ours over upstream whichever came first; the ratios'
    median and quartiles; an order that does not alternate is refused."""
    from benchmarks import e2e_summary

    def run(name, fps):
        return progress_run(tmp_path / name, fps)

    runs = [run("r-up-1", [1.0, 10, 10, 12]), run("r-ours-2", [1.0, 30, 20, 40]),
            run("r-ours-3", [99.0, 33, 33]), run("r-up-4", [1.0, 11, 11]),
            run("r-up-5", [1.0, 8, 8]), run("r-ours-6", [1.0, 32, 32])]
    out = e2e_summary.summary(runs[::-1])  # named by their place in the call, not this list
    assert out["median_steps_per_s"]["up-1"] == 10.0 and \
        out["median_steps_per_s"]["ours-2"] == 30.0 and out["median_steps_per_s"]["ours-3"] == 33
    assert out["pairs"] == [{"up": "up-1", "ours": "ours-2", "ratio": 3.0},
                            {"up": "up-4", "ours": "ours-3", "ratio": 3.0},
                            {"up": "up-5", "ours": "ours-6", "ratio": 4.0}]
    assert out["ratio_quartiles"] == [3.0, 3.0, 3.5]
    assert "two ours runs" in refused(capsys, e2e_summary.summary,
                                      [run("r-ours-7", [1.0, 2]), run("r-ours-8", [1.0, 2])])


def test_the_stand_ins_share_is_taken_after_a_quarter_of_the_runs_simulate_calls(tmp_path):
    """benchmarks/e2e_summary.py's ``--timed``: the stand-in's share of the wall time from the
    line where a quarter of the simulate calls were made to the last (the start, where the
    stand-in builds the sim, left out), its ms per simulate call and each method's share."""
    from benchmarks import e2e_summary

    lines = [{"wall": 0.0, "total": 0.0, "calls": {"create_sim": 1},
              "seconds": {"create_sim": 0.0}},
             {"wall": 10.0, "total": 5.0, "calls": {"create_sim": 1, "simulate": 10},
              "seconds": {"create_sim": 4.0, "simulate": 1.0}},
             {"wall": 20.0, "total": 8.0, "calls": {"create_sim": 1, "simulate": 40},
              "seconds": {"create_sim": 4.0, "simulate": 4.0}}]
    times = tmp_path / "t.jsonl"
    times.write_text("".join(json.dumps(line) + "\n" for line in lines))
    share = e2e_summary.standin_share(times)
    assert share["share"] == 0.3 and share["ms_per_simulate"] == 100.0  # 3 s over 10, 30 calls
    assert share["window_s"] == 10.0 and share["share_by_method"] == {"simulate": 0.3}


def test_the_scaling_summary_adds_a_slots_runs_and_pairs_each_with_the_one_slot_beside_it(
        tmp_path, capsys):
    """benchmarks/scaling_summary.py (#52): a slot of two or four processes at once counts the
    sum of their medians (each without its first update); each is paired with the one slot
    right before it, else right after it, with the ratios' quartiles for each kind; the most
    each GPU held; a slot of the wrong size, a slot in no pair and a slot with no one slot
    beside it are refused."""
    from benchmarks import scaling_summary

    def run(name, fps):
        return progress_run(tmp_path / name, fps)

    runs = [run("one-1", [1.0, 10, 10]), run("two-2-0", [1.0, 9, 9]), run("two-2-1", [50.0, 10]),
            run("two-3-0", [1.0, 8, 8]), run("two-3-1", [1.0, 8]), run("one-4", [1.0, 8, 8])]
    out = scaling_summary.summary(runs[::-1])
    assert out["slot_steps_per_s"] == {"one-1": 10.0, "two-2": 19.0, "two-3": 16.0,
                                       "one-4": 8.0}
    assert out["pairs"] == [{"one": "one-1", "two": "two-2", "ratio": 1.9},
                            {"one": "one-4", "two": "two-3", "ratio": 2.0}]
    assert out["ratio_quartiles"] == {"two": [1.925, 1.95, 1.975]}
    # four GPUs: one, four, two, one, then one, two, four, one
    mixed = [run("one-11", [1.0, 10]), run("one-14", [1.0, 5]), run("one-15", [1.0, 10]),
             run("one-18", [1.0, 10])]
    mixed += [run("four-%d-%d" % (n, g), [1.0, fps]) for n, fps in ((12, 9), (17, 8))
              for g in range(4)]
    mixed += [run("two-%d-%d" % (n, g), [1.0, fps]) for n, fps in ((13, 5), (16, 9))
              for g in range(2)]
    out = scaling_summary.summary(mixed)
    assert out["pairs"] == [{"one": "one-11", "four": "four-12", "ratio": 3.6},
                            {"one": "one-14", "two": "two-13", "ratio": 2.0},
                            {"one": "one-15", "two": "two-16", "ratio": 1.8},
                            {"one": "one-18", "four": "four-17", "ratio": 3.2}]
    assert out["ratio_quartiles"] == {"four": [3.3, 3.4, 3.5], "two": [1.85, 1.9, 1.95]}
    assert scaling_summary.memory(["0, 100", "1, 90", "0, 300", "garbage", "1, 80"]) == \
        {"0": 300, "1": 90}
    summarise = scaling_summary.summary
    assert "slot 5 (two) holds 1 runs" in refused(capsys, summarise, [run("two-5-0", [1.0, 2])])
    assert "slot one-6 is in no pair" in refused(
        capsys, summarise, [run("one-6", [1.0, 2]), run("one-7", [1.0, 2])])
    assert "slot four-21 has no free one slot" in refused(
        capsys, summarise, [run("one-19", [1.0, 2])] + [run("two-20-%d" % g, [1.0, 2])
                                                      for g in range(2)]
        + [run("four-21-%d" % g, [1.0, 2]) for g in range(4)])
    assert "not a run folder" in refused(capsys, summarise, [run("three-8", [1.0, 2])])
