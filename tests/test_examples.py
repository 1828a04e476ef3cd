"""examples/: the data writers (on small stand-in corpora), the order probe and the token-similarity probe."""

import csv
import json

import numpy as np
import pytest

from tests.scripts import load_script


def test_split_is_stratified_deterministic_and_reads_latin1(tmp_path):
    bbc = load_script("bbc_news")
    for topic, count in (("sport", 10), ("tech", 5)):
        (tmp_path / topic).mkdir()
        for n in range(count):
            (tmp_path / topic / f"{n:03d}.txt").write_bytes(
                f"Title {topic} {n}\n\nBody costs \xa35.\n".encode("latin-1"))
    train, dev = bbc.split(tmp_path, dev_fraction=0.2, seed=0)
    assert sorted(label for _, label in dev) == ["sport", "sport", "tech"]
    assert len(train) == 12 and not {t for t, _ in train} & {t for t, _ in dev}
    assert bbc.split(tmp_path, 0.2, 0) == (train, dev)
    assert train[0][0].startswith("Title ") and "\u00a35" in train[0][0] and "\n" not in train[0][0]
    rows = list(csv.reader(load_script("labelled_text").to_csv(train).splitlines()))
    assert rows[0] == ["text", "label"] and len(rows) == 13


def test_train_per_class_keeps_that_many_of_each_topic_deterministically():
    shared = load_script("labelled_text")
    train = [(f"{topic} {n}", topic) for topic, count in (("sport", 6), ("tech", 4)) for n in range(count)]
    kept = shared.subsample(train, per_class=3, seed=0)
    assert sorted(label for _, label in kept) == ["sport"] * 3 + ["tech"] * 3
    assert set(kept) <= set(train) and kept == shared.subsample(train, 3, 0)
    with pytest.raises(SystemExit, match="'tech': 4"):
        shared.subsample(train, per_class=5, seed=0)


def test_unlabeled_text_is_the_whole_training_split_and_never_dev(tmp_path):
    spam = load_script("spam_assassin")
    folder = tmp_path / "data"
    bodies = {"spam-1": ["Win money now", "Cheap pills here", "Win money now"], "spam-2": ["Click this link"],
              "easy-ham-1": ["Lunch at noon?", "The build is green"], "easy-ham-2": ["Minutes attached"],
              "hard-ham-1": ["Your order shipped"]}
    for group, texts in bodies.items():
        (folder / group).mkdir(parents=True)
        for n, body in enumerate(texts):
            raw = f"From: a@b.c\nReceived: from relay.spamhost.example\nSubject: note\n\n{body}\n"
            (folder / group / f"{n:05d}.json").write_text(json.dumps({"id": n, "group": group, "text": raw}))
    assert spam.main(["--corpus", str(folder), "--output", str(tmp_path / "out"), "--dev_fraction", "0.25",
                      "--train_per_class", "2", "--unlabeled", str(tmp_path / "unlabeled.txt")]) == 0
    read = lambda name: list(csv.DictReader((tmp_path / "out" / name).open()))  # noqa: E731
    train, dev = read("train.csv"), read("dev.csv")
    unlabeled = [doc for doc in (tmp_path / "unlabeled.txt").read_text().split("\n\n") if doc]
    assert sorted(row["label"] for row in train) == ["ham", "ham", "spam", "spam"]
    assert len(unlabeled) + len(dev) == 7  # the duplicate message is kept once
    assert not set(unlabeled) & {row["text"] for row in dev}
    assert {row["text"] for row in train} <= set(unlabeled)
    assert all("relay" not in text and text.startswith("note ") for text in unlabeled)  # headers dropped


def test_message_text_reads_html_and_quoted_printable_bodies():
    spam = load_script("spam_assassin")
    raw = ("Subject: Offer\nContent-Type: text/html; charset=iso-8859-1\n"
           "Content-Transfer-Encoding: quoted-printable\n\n"
           "<html><style>p {}</style><body><p>Save 50=25 to=\nday</p><script>x()</script></body></html>\n")
    assert spam.message_text(raw) == "Offer Save 50% today"
    assert spam.message_text("Subject: empty\n\n   \n") == ""


def test_order_probe_shuffles_words_only_and_keeps_targets_aligned():
    probe = load_script("order_probe")
    token_ids = np.array([[2, 10, 11, 12, 3, 13, 14, 3, 0, 0],
                          [2, 20, 21, 3, 22, 23, 24, 25, 26, 3]])
    permutations = probe.shuffle_permutations(token_ids, [0, 2, 3], np.random.default_rng(1))
    shuffled = probe.permute(token_ids, permutations)
    structure = np.isin(token_ids, [0, 2, 3])
    np.testing.assert_array_equal(shuffled[structure], token_ids[structure])
    assert (shuffled != token_ids).any()
    for row in range(2):
        assert sorted(shuffled[row]) == sorted(token_ids[row])
    positions = np.array([[1, 5], [4, 8]])
    np.testing.assert_array_equal(
        np.take_along_axis(shuffled, probe.moved_positions(positions, permutations), axis=1),
        np.take_along_axis(token_ids, positions, axis=1))
    assert probe.auc(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8])) == 0.75


def test_order_probe_in_order_scores_are_the_models_own():
    import tensorflow as tf

    from electra_tf.pretraining.config import PretrainingConfig
    from electra_tf.pretraining.pretrainer import ElectraPretrainer
    from electra_tf.pretraining.synthetic import masked_batch

    probe = load_script("order_probe")
    config = PretrainingConfig.load("electra_tiny", {"vocab_size": 60, "num_layers": 1, "dropout": 0.0,
                                                  "max_seq_length": 32})
    pretrainer = ElectraPretrainer.from_pretraining_config(config)
    batch = masked_batch(config, 4, seed=3)
    results = probe.probe(pretrainer, [batch], fixed_ids=[0, 2, 3], seed=7)
    outputs = pretrainer.compute_pretraining_outputs(batch, tf.constant([7, 0], tf.int64))
    real = batch["padding_mask"] > 0
    expected_auc = probe.auc(outputs["replaced_token_labels"].numpy()[real],
                             outputs["disc_logits"].numpy()[real])
    assert results["in order"]["disc_auc"] == expected_auc
    predicted = outputs["mlm_logits"].numpy().argmax(-1)
    used = batch["mask_weights"] > 0
    assert results["in order"]["masked_lm_accuracy"] == (predicted == batch["mask_ids"])[used].mean()
    assert set(results["shuffled"]) == {"disc_auc", "masked_lm_accuracy"}


def test_token_similarity_is_one_for_identical_vectors_and_zero_for_orthogonal():
    probe = load_script("token_similarity")
    assert probe.mean_pairwise_cosine(np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])) == pytest.approx(1.0)
    assert probe.mean_pairwise_cosine(np.eye(3)) == pytest.approx(0.0)
    assert probe.mean_pairwise_cosine(np.array([[1.0, 0.0], [1.0, 1.0]])) == pytest.approx(2 ** -0.5)


def test_brown_split_is_by_text_and_the_files_read_back_as_tagging_data(tmp_path):
    brown = load_script("brown_pos")
    corpus = tmp_path / "package"
    corpus.mkdir()
    names = [f"c{genre}{n:02d}" for genre in "abcdefghjklmnpr" for n in range(1, 40)][:500]
    for index, name in enumerate(names):
        (corpus / name).write_text(f"\n\n\tThe/at Text-{index}/np-tl ran/vbd ``/`` far/rb ''/'' ./.\n\n"
                                   f"\tIt/pps stopped/vbd ./.\n", encoding="utf-8")
    (corpus / "cats.txt").write_text("ca01 news\n")  # not a text
    assert brown.main(["--corpus", str(corpus), "--output", str(tmp_path / "pos"), "--train_sentences", "30",
                       "--dev_every", "10", "--dev_sentences", "1", "--unlabeled", str(tmp_path / "u.txt")]) == 0
    from electra_tf.finetuning.text.task_data import read_tagging_files

    task = read_tagging_files(tmp_path / "pos" / "train.conll", tmp_path / "pos" / "dev.conll")
    assert len(task.train) == 30 and len(task.eval) == 50  # one sentence of every 10th text
    assert task.eval.texts[0] == ["The", "Text-9", "ran", '"', "far", '"', "."]  # quotes as ", markers gone
    assert [task.labels.names[i] for i in task.eval.labels[0]] == ["at", "np", "vbd", "``", "rb", "''", "."]
    unlabeled = (tmp_path / "u.txt").read_text()
    dev_words = {words[1] for words in task.eval.texts}
    assert unlabeled.count("\n\n") == 450 and not any(f" {word} " in unlabeled for word in dev_words)
    with pytest.raises(SystemExit, match="holds 499 Brown texts"):
        (corpus / names[0]).unlink()
        brown.main(["--corpus", str(corpus)])


def test_squad_writer_copies_cuts_whole_paragraphs_and_writes_only_training_text(tmp_path):
    squad = load_script("squad")
    support = tmp_path / "support"
    support.mkdir()

    def article(title, paragraphs):
        return {"title": title, "paragraphs": [{"context": f"{title} paragraph {p}.",
                                                "qas": [{"id": f"{title}{p}{q}", "question": "?", "answers": []}
                                                        for q in range(3)]} for p in range(paragraphs)]}
    (support / "train-v1.1.json").write_text(json.dumps({"version": "1.1", "data": [article("A", 2), article("B", 2)]}))
    (support / "dev-v1.1.json").write_text(json.dumps({"version": "1.1", "data": [article("C", 1)]}))
    (support / "dev-v1.1.json").write_text(json.dumps({"version": "1.1", "data": [article("C", 3)]}))
    assert squad.main(["--support", str(support), "--output", str(tmp_path / "out"), "--train_questions", "7",
                       "--dev_questions", "4", "--unlabeled", str(tmp_path / "u.txt")]) == 0
    subset = json.loads((tmp_path / "out" / "train-7.json").read_text())
    assert [len(a["paragraphs"]) for a in subset["data"]] == [2, 1]  # 9 questions: whole paragraphs
    dev = json.loads((tmp_path / "out" / "dev-4.json").read_text())
    assert [len(a["paragraphs"]) for a in dev["data"]] == [2]  # 6 questions: whole paragraphs
    assert (tmp_path / "u.txt").read_text() == "A paragraph 0.\nA paragraph 1.\n\nB paragraph 0.\nB paragraph 1.\n"
    (support / "dev-v1.1.json").write_text(json.dumps({"version": "1.1", "data": [article("A", 1)]}))
    assert squad.main(["--support", str(support), "--output", str(tmp_path / "out2")]) == 1  # shared article


def test_conll2003_writer_keeps_word_and_entity_tag_and_drops_docstart(tmp_path):
    conll = load_script("conll2003")
    source = tmp_path / "en"
    source.mkdir()
    text = "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\nPeter NNP B-NP B-PER\n\n" \
           "-DOCSTART- -X- -X- O\n\nBonn NNP B-NP B-LOC\n"
    for name in ("train.txt", "valid.txt", "test.txt"):
        (source / name).write_text(text, encoding="utf-8")
    assert conll.main(["--source", str(source), "--output", str(tmp_path / "out"),
                       "--unlabeled", str(tmp_path / "u.txt"), "--train_sentences", "2", "--dev_sentences", "1"]) == 0
    assert (tmp_path / "out" / "train-2.conll").read_text() == "EU\tB-ORG\nrejects\tO\n\nPeter\tB-PER\n\n"
    assert (tmp_path / "out" / "dev-1.conll").read_text() == "EU\tB-ORG\nrejects\tO\n\n"
    from electra_tf.finetuning.text.task_data import read_tagging_files

    task = read_tagging_files(tmp_path / "out" / "train.conll", tmp_path / "out" / "test.conll")
    assert task.train.texts == [["EU", "rejects"], ["Peter"], ["Bonn"]]
    assert [[task.labels.names[t] for t in tags] for tags in task.eval.labels] == [["B-ORG", "O"], ["B-PER"], ["B-LOC"]]
    assert (tmp_path / "u.txt").read_text() == "EU rejects\nPeter\n\nBonn\n"
    (source / "test.txt").write_text("EU NNP B-ORG\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="expected 4 columns"):
        conll.main(["--source", str(source), "--output", str(tmp_path / "bad")])


def test_pretraining_corpus_takes_only_training_text_and_counts_it(tmp_path, monkeypatch, capsys):
    corpus = load_script("pretraining_corpus")
    support, source = tmp_path / "support", tmp_path / "en"
    support.mkdir()
    source.mkdir()
    (support / "train-v1.1.json").write_text(json.dumps({"version": "1.1", "data": [
        {"title": "A", "paragraphs": [{"context": "Train paragraph one.", "qas": []},
                                      {"context": "Train paragraph two.", "qas": []}]}]}))
    (support / "dev-v1.1.json").write_text(json.dumps({"version": "1.1", "data": [
        {"title": "D", "paragraphs": [{"context": "A dev paragraph.", "qas": []}]}]}))
    (source / "train.txt").write_text("EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n", encoding="utf-8")
    (source / "valid.txt").write_text("Dev NNP B-NP O\n\n", encoding="utf-8")
    monkeypatch.setattr(corpus, "wikipedia_documents", lambda: ["A wiki article."])  # the real one takes seconds
    assert corpus.main(["--squad_support", str(support), "--conll_source", str(source),
                        "--output", str(tmp_path / "c.txt")]) == 0
    text = (tmp_path / "c.txt").read_text(encoding="utf-8")
    assert text.startswith("Train paragraph one.\nTrain paragraph two.\n\nEU rejects\n\nA wiki article.\n\n")
    assert "A dev paragraph" not in text and "Dev" not in text.split() and text.count("\n\n") == 2 + 300  # + ABC news
    assert "SQuAD 1.1 training paragraphs" in capsys.readouterr().out


def test_gpu_payoff_commands_budget_and_row(tmp_path):
    payoff = load_script("gpu_payoff")
    assert payoff.steps_for(15, 0.0384) == 23437 and payoff.steps_for(0.001, 10.0) == 1
    with pytest.raises(ValueError):
        payoff.steps_for(15, 0.0)
    base = ["--data", str(tmp_path), "--squad", str(tmp_path), "--conll", str(tmp_path)]
    with pytest.raises(SystemExit, match="metadata.json is missing"):
        payoff.main(["--arm", "mlm", *base])
    args = payoff.argparse.Namespace(arm="mlm", config="electra_small", data=tmp_path / "d", batch_size=128,
                                     checkpoint_every=2000, log_every=100, squad=tmp_path / "s",
                                     conll=tmp_path / "c", pretrain_args=["--seed", "3"], finetune_args=[])
    pretrain = payoff.pretrain_command(args, tmp_path / "m", 900)
    assert pretrain[1:3] == ["-m", "electra_tf.pretrain"] and pretrain[-3:] == ["objective=mlm", "--seed", "3"]
    assert pretrain[pretrain.index("--steps") + 1] == "900"
    conll = payoff.finetune_command(args, "conll", tmp_path / "m", tmp_path / "o", seed=1)
    assert conll[conll.index("--test") + 1].endswith("test.conll") and "--random_init" not in conll
    squad = payoff.finetune_command(payoff.argparse.Namespace(**{**vars(args), "arm": "random"}),
                                    "squad", tmp_path / "m", tmp_path / "o", seed=0)
    assert squad[squad.index("--eval") + 1].endswith("dev-v1.1.json") and squad[-1] == "--random_init"
    from electra_tf import finetune as finetune_cli, pretrain as pretrain_cli  # the CLIs take each command
    pretrain_cli.build_parser().parse_args(pretrain[3:])
    for command in (conll, squad):
        finetune_cli.build_parser().parse_args(command[3:])
    row = payoff.table_row({
        "arm": "electra", "epochs": 3.25,
        "pretraining": {"step": 23437, "train_seconds": 903.0, "tokens_seen": 383_991_808,
                        "final_eval": {"disc_auc": 0.91234, "masked_lm_accuracy": 0.4}},
        "squad": [{"exact_match": 40.0, "f1": 50.0}, {"exact_match": 42.0, "f1": 52.0}],
        "conll": [{"dev_f1": 0.8, "test_f1": 0.75}, {"dev_f1": 0.82, "test_f1": 0.77}]})
    assert row == ("| electra | 23,437 steps, 15.1 min, 384M tokens (3.2 epochs), AUC 0.912, MLM acc 0.400 | "
                   "41.0 / 51.0 | 81.0 / 76.0 | 2 seed(s) |")


MULTI_LABEL_TOPICS = [["nature", "water"], ["town", "books"], ["nature"], ["town"]]  # per test document


def test_a_kind_of_ones_own_registers_and_runs_through_the_commands(corpus, short_run, tmp_path):
    """examples/multi_label.py, a module outside the package, imported by the commands (--import):
    fine-tuned, scored on a test file, served (TF Serving and LiteRT), evaluated alone, all by the
    package's own commands with no edit of the package."""
    import subprocess
    import sys

    from tests.cli_runs import REPO, environment

    rows = [{"text": s, "labels": MULTI_LABEL_TOPICS[d]} for d, document in enumerate(corpus.DOCUMENTS) for s in document]
    for name, chosen in (("train.jsonl", rows), ("dev.jsonl", rows[::2])):
        (tmp_path / name).write_text("".join(json.dumps(row) + "\n" for row in chosen), encoding="utf-8")
    module, out = str(REPO / "examples" / "multi_label.py"), tmp_path / "out"
    code = f"""
import json, sys
from electra_tf import export, finetune
common = ["--import", {module!r}]
assert finetune.main(common + ["--kind", "multi_label", "--pretrained", {str(short_run / "run")!r},
    "--train", {str(tmp_path / "train.jsonl")!r}, "--eval", {str(tmp_path / "dev.jsonl")!r},
    "--test", {str(tmp_path / "dev.jsonl")!r}, "--output_dir", {str(out)!r}, "--epochs", "2", "--batch_size", "4",
    "--learning_rate", "3e-3", "--threshold", "0.4"]) == 0
assert export.main(common + ["--model_dir", {str(out)!r}, "--format", "litert"]) == 0
assert finetune.main(common + ["--eval_only", "--pretrained", {str(out)!r}, "--eval", {str(tmp_path / "dev.jsonl")!r},
    "--output_dir", {str(tmp_path / "evaluated")!r}]) == 0
"""
    result = subprocess.run([sys.executable, "-c", code], env=environment(), capture_output=True, text=True,
                            timeout=600, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((out / "metrics.json").read_text())
    assert summary["kind"] == "multi_label" and summary["labels"] == ["books", "nature", "town", "water"]
    assert set(summary["eval"]) == {"micro_f1", "macro_f1", "exact_match", "score"} == set(summary["test"])
    assert summary["eval"]["score"] == summary["eval"]["micro_f1"] > 0
    assert json.loads((out / "config.json").read_text())["task"]["threshold"] == 0.4
    assert (out / "export" / "multi_label.tflite").is_file() or list((out / "export").glob("*.tflite"))
    evaluated = json.loads((tmp_path / "evaluated" / "metrics.json").read_text())
    assert evaluated["eval"] == summary["eval"]  # the best epoch's model, read back, scores as it did
    served = run_python_served(out / "export" / summary["task"] / "1", ["The river rises.", "The library opened."])
    assert np.array(served["probabilities"]).shape == (2, 4) and served["label_names"][0] == summary["labels"]
    assert all(label in ("", *summary["labels"]) for row in served["labels"] for label in row)


def run_python_served(version_dir, texts):
    from tests.conftest import run_python

    return run_python(
        "import json, tensorflow as tf, tensorflow_text\n"
        f"out = tf.saved_model.load({str(version_dir)!r}).signatures['serving_default'](text=tf.constant({texts!r}))\n"
        "print(json.dumps({k: v.numpy().tolist() for k, v in out.items()}, default=lambda b: b.decode()))")
