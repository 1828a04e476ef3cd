"""A run's history across its processes: a killed process leaves what it saved, a finished run's
metrics.json of an earlier version seeds the history, and totals sum every process."""

import json

from electra_tf.training.history import RunHistory


def test_a_killed_process_leaves_its_saved_steps_and_evaluations(tmp_path):
    path = tmp_path / "processes.json"
    killed = RunHistory(path)
    killed.begin(resumed_from=None, step=0)
    killed.update(step=200, timings={"train_seconds": 40.0, "first_step_seconds": 5.0, "step_seconds": 0.2},
                  evaluations={100: {"auc": 0.6}, 200: {"auc": 0.7}})
    # ... SIGKILL here: no final update. The next process reads what was written at the last save.
    resumed = RunHistory(path)
    assert [p["status"] for p in resumed.processes()] == ["running"]
    resumed.begin(resumed_from=200, step=200)
    resumed.update(step=400, timings={"train_seconds": 30.0, "first_step_seconds": 1.0, "step_seconds": 0.1},
                   evaluations={300: {"auc": 0.75}, 400: {"auc": 0.8}}, status="finished")
    totals = resumed.totals()
    assert totals["train_seconds"] == 70.0 and totals["steps_trained"] == 400 and totals["processes"] == 2
    assert totals["first_step_seconds"] == 5.0 and abs(totals["step_seconds"] - 0.15) < 1e-9
    assert list(resumed.evaluations()) == ["100", "200", "300", "400"]
    assert [p["evaluations"] for p in resumed.described()] == [2, 2]
    assert json.loads(path.read_text())[-1]["status"] == "finished"


def test_a_run_finished_before_histories_existed_keeps_its_one_process(tmp_path):
    summary = {"step": 2000, "steps_this_run": 2000, "train_seconds": 480.0, "first_step_seconds": 3.3,
               "step_seconds": 0.17, "seconds": 523.0, "evaluations_during_run": {"1000": {"auc": 0.79}}}
    (tmp_path / "metrics.json").write_text(json.dumps(summary))
    history = RunHistory(tmp_path / "processes.json", summary_path=tmp_path / "metrics.json")
    history.begin(resumed_from=2000, step=2000)
    history.update(step=2000, status="finished")  # a rerun with nothing left to train
    totals = history.totals()
    assert totals["train_seconds"] == 480.0 and totals["steps_trained"] == 2000 and totals["processes"] == 2
    assert history.evaluations() == {"1000": {"auc": 0.79}}


def test_a_worker_that_is_not_the_chief_writes_nothing(tmp_path):
    history = RunHistory(tmp_path / "processes.json", writes=False)
    history.begin(resumed_from=None, step=0)
    history.update(step=10)
    assert not (tmp_path / "processes.json").exists() and history.processes()[0]["steps"] == 10
