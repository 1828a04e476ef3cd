"""`python -m electra_tf.finetune --task squad` end to end on small SQuAD files made from the
test corpus: 1.1 and 2.0 outputs under the official names, predictions that the served model
reproduces in a TensorFlow-only process, and bad files named."""

import json
import re
from pathlib import Path

import pytest

from electra_tf import finetune
from electra_tf.finetuning.question_answering.task import METRICS_V1, METRICS_V2

# (question, answer) per test document; the answer is found in the document's text.
QUESTIONS = [
    [("Where does the river rise?", "in the northern hills"), ("What do farmers grow?", "wheat, barley and apples"),
     ("When was the bridge built?", "in the twelfth century")],
    [("When did the library open?", "1902"), ("What faces the square?", "tall windows"),
     ("What do the librarians keep?", "a card catalogue")],
    [("When do bees visit the orchard?", "every morning"), ("What is dark and strong?", "honey from heather")],
    [("When is the market held?", "on Saturdays"), ("Where does music play?", "near the fountain")],
]


def squad_file(path, documents, version="1.1", impossible=False):
    """A SQuAD file: each document one paragraph with its questions; with `impossible`, each
    paragraph is also asked the next document's questions, marked unanswerable (SQuAD 2.0's way)."""
    articles = []
    for number, document in enumerate(documents):
        context = " ".join(document)
        qas = [{"id": f"d{number}q{i}", "question": question,
                "answers": [{"text": answer, "answer_start": context.index(answer)}]}
               for i, (question, answer) in enumerate(QUESTIONS[number])]
        if impossible:
            for qa in qas:
                qa["is_impossible"] = False
            other = QUESTIONS[(number + 1) % len(documents)]
            qas += [{"id": f"d{number}n{i}", "question": question, "answers": [], "is_impossible": True}
                    for i, (question, _) in enumerate(other)]
        articles.append({"title": f"doc{number}", "paragraphs": [{"context": context, "qas": qas}]})
    path.write_text(json.dumps({"version": version, "data": articles}), encoding="utf-8")
    return path


def run(pretrained, train, evaluation, output, *extra):
    return finetune.main(["--pretrained", str(pretrained), "--task", "squad", "--train", str(train),
                          "--eval", str(evaluation), "--output_dir", str(output), "--max_seq_length", "48", "--max_query_length", "16",
                          "--batch_size", "8", "--log_every", "5", *extra])


def test_squad_1_1_outputs_and_the_export_answer_alike(pretrained_run, corpus, tmp_path, run_python, capsys):
    data = squad_file(tmp_path / "train-v1.1.json", corpus.DOCUMENTS)
    assert run(pretrained_run, data, data, tmp_path / "out", "--epochs", "2", "--doc_stride", "16") == 0
    printed = capsys.readouterr().out
    assert "SQuAD 1.1: 10 training questions ->" in printed and "doc_stride 16, max_query_length 16" in printed
    assert re.search(r"\d+ training windows / 10 eval questions", printed)  # units named
    assert "windows: 100.0%" in printed and "predicting: 100.0%" in printed and "answers: 100.0%" in printed
    summary = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert list(summary["eval"]) == [*METRICS_V1, "score"] and summary["task"] == "squad"
    assert summary["eval"]["score"] == summary["eval"]["f1"] == max(e["f1"] for e in summary["epochs"])
    assert 0 <= summary["eval"]["exact_match"] <= summary["eval"]["f1"] <= 100
    windows = summary["question_answering"]["eval_windows"]
    assert windows > 10 and summary["train_examples"] == windows  # the same file: the same windows
    predictions = json.loads((tmp_path / "out" / "predictions.json").read_text())
    contexts = {f"d{n}q{i}": " ".join(doc) for n, doc in enumerate(corpus.DOCUMENTS) for i in range(len(QUESTIONS[n]))}
    assert set(predictions) == set(contexts)
    assert all(text in contexts[qid] for qid, text in predictions.items())
    assert not (tmp_path / "out" / "null_odds.json").exists()

    export = summary["export"]
    task = json.loads((tmp_path / "out" / "export" / "squad" / "1" / "assets.extra" / "task.json").read_text())
    assert task["question_answering"] and task["doc_stride"] == 16 and not task["answerable"]
    ids = sorted(contexts)
    questions = {f"d{n}q{i}": q for n in range(len(QUESTIONS)) for i, (q, _) in enumerate(QUESTIONS[n])}
    served = run_python(f"""
import json, tensorflow as tf, tensorflow_text
serve = tf.saved_model.load({export!r}).signatures["serving_default"]
out = serve(question=tf.constant({[questions[q] for q in ids]!r}), context=tf.constant({[contexts[q] for q in ids]!r}))
print(json.dumps({{"answer": [a.decode() for a in out["answer"].numpy()], "start": out["answer_start"].numpy().tolist(),
                  "end": out["answer_end"].numpy().tolist(), "keys": sorted(out)}}))
""")
    assert served["answer"] == [predictions[q] for q in ids]
    assert [contexts[q][s:e] for q, s, e in zip(ids, served["start"], served["end"])] == served["answer"]
    assert served["keys"] == ["answer", "answer_end", "answer_start", "no_text", "score"]


def test_squad_2_0_reports_the_official_names_and_null_odds(pretrained_run, corpus, tmp_path):
    data = squad_file(tmp_path / "train-v2.0.json", corpus.DOCUMENTS, version="v2.0", impossible=True)
    assert run(pretrained_run, data, data, tmp_path / "out", "--epochs", "1", "--qa_head", "plain",
               "--test", str(data)) == 0
    summary = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert list(summary["eval"]) == [*METRICS_V2, "score"] and summary["task"] == "squad2"
    # --test scores a file once with the best epoch, beside its own predictions.
    assert summary["test"] == pytest.approx(summary["eval"], abs=1e-6)
    assert json.loads((tmp_path / "out" / "test_predictions.json").read_text()) == \
        json.loads((tmp_path / "out" / "predictions.json").read_text())
    assert summary["question_answering"]["null_score_threshold"] == -2.75
    null_odds = json.loads((tmp_path / "out" / "null_odds.json").read_text())
    predictions = json.loads((tmp_path / "out" / "predictions.json").read_text())
    assert set(null_odds) == set(predictions) and len(predictions) == 20
    assert all(text == "" for qid, text in predictions.items() if null_odds[qid] > -2.75)
    assert (Path(summary["export"]) / "saved_model.pb").is_file()  # the plain head exports too


def test_a_question_length_that_leaves_no_room_is_refused_before_training(pretrained_run, corpus, tmp_path, capsys):
    data = squad_file(tmp_path / "train-v1.1.json", corpus.DOCUMENTS)
    assert run(pretrained_run, data, data, tmp_path / "out", "--max_query_length", "45") == 2
    assert "--max_query_length 45 leaves no room" in capsys.readouterr().err


@pytest.mark.parametrize("content, message", [
    ("text,label\na,b\n", "is not a SQuAD JSON file"),
    ('{"version": "1.1"}', "no 'data' list"),
    ('{"data": [{"paragraphs": [{"context": "x", "qas": [{"question": "q?", "answers": []}]}]}]}', "without an 'id'"),
])
def test_bad_squad_files_are_named(pretrained_run, tmp_path, capsys, content, message):
    bad = tmp_path / "train.json"
    bad.write_text(content, encoding="utf-8")
    assert run(pretrained_run, bad, bad, tmp_path / "out") == 2
    error = capsys.readouterr().err
    assert str(bad) in error and message in error and "Traceback" not in error


def test_answerability_labels_are_the_questions_not_the_windows(small_vocab, corpus, tmp_path):
    """As the official code: a window of an answerable question that lacks the answer is
    labelled [CLS] for its span, but still answerable; only impossible questions are."""
    import numpy as np

    from electra_tf.data.tokenization import ElectraTokenizer
    from electra_tf.finetuning.config import FinetuningConfig
    from electra_tf.finetuning.question_answering.task import QuestionAnsweringTask

    data = squad_file(tmp_path / "train-v2.0.json", corpus.DOCUMENTS, version="v2.0", impossible=True)
    config = FinetuningConfig.for_kind("question_answering").replace(
        pretrained="x", train=str(data), eval=str(data), batch_size=1000, doc_stride=8, max_query_length=16)
    task = QuestionAnsweringTask(config)
    train, _ = task.prepare(task.read_files(), ElectraTokenizer(small_vocab), 40, seed=0)
    _, labels = next(iter(train.take(1)))
    starts, impossible = labels["start_positions"].numpy(), labels["is_impossible"].numpy()
    assert ((starts == 0) & (impossible == 0)).sum() > 0  # answerable questions' windows without the answer
    assert impossible.sum() > 0 and np.all(starts[impossible == 1] == 0)
