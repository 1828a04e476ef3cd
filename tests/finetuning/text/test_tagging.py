"""Entity tagging in the fine-tuning run: entity scores in metrics.json, the best epoch by
entity F1, predictions.conll for every scored file, --test, --task conll2003."""

import json

import pytest

from electra_tf import finetune

# Words of the test corpus tagged as entities (our own, for the fixture): places and things.
ENTITIES = {"river": "LOC", "library": "ORG", "market": "ORG", "bridge": "LOC", "square": "LOC", "bees": "MISC",
            "honey": "MISC", "hills": "LOC"}


def conll(path, sentences):
    lines = []
    for sentence in sentences:
        previous = None
        for word in sentence.replace(".", " .").replace(",", " ,").split():
            kind = ENTITIES.get(word.lower())
            lines.append(f"{word}\t{'O' if kind is None else ('I-' if previous == kind else 'B-') + kind}")
            previous = kind
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_entity_tags_are_scored_by_entity_with_predictions_and_a_test_file(pretrained_run, corpus, tmp_path, capsys,
                                                                           run_python):
    sentences = [s for document in corpus.DOCUMENTS for s in document]
    train, dev, test = conll(tmp_path / "train.conll", sentences), conll(tmp_path / "dev.conll", sentences[:6]), \
        conll(tmp_path / "test.conll", sentences[6:])
    assert finetune.main(["--pretrained", str(pretrained_run), "--task", "conll2003", "--train", str(train),
                          "--eval", str(dev), "--test", str(test), "--output_dir", str(tmp_path / "out"),
                          "--epochs", "2", "--batch_size", "4", "--max_seq_length", "32"]) == 0
    printed = capsys.readouterr().out
    assert "entities scored by conlleval chunks, the best epoch by entity F1" in printed
    assert "epoch 2: eval entity_f1" in printed and "test (epoch" in printed
    summary = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert summary["task"] == "conll2003" and summary["entity_scheme"] == "IOB2"
    assert list(summary["eval"]) == ["entity_f1", "entity_precision", "entity_recall", "accuracy", "per_type", "score"]
    assert summary["eval"]["score"] == summary["eval"]["entity_f1"] == max(e["entity_f1"] for e in summary["epochs"])
    assert set(summary["eval"]["per_type"]) <= {"LOC", "ORG", "MISC"}
    assert set(summary["test"]) == set(summary["eval"])
    for name, count in (("predictions.conll", 6), ("test_predictions.conll", len(sentences) - 6)):
        blocks = (tmp_path / "out" / name).read_text().strip("\n").split("\n\n")
        assert len(blocks) == count
        assert all(len(line.split(" ")) == 3 for block in blocks for line in block.splitlines())
    first = (tmp_path / "out" / "predictions.conll").read_text().splitlines()[1].split(" ")
    assert first[:2] == ["river", "B-LOC"]

    # The served tagger returns entities whose offsets cut their text, for texts with none,
    # several, and multi-byte characters; the same chunks as the Python scorer finds in its tags.
    export = summary["export"]
    texts = ["", "the the the", "The river flows past the library to the square by the market.",
             "Über die Brücke: river  café   東京 library", b"bad \xff river".decode("latin-1")]
    served = run_python(f"""
import json, tensorflow as tf, tensorflow_text
serve = tf.saved_model.load({export!r}).signatures["serving_default"]
out = serve(text=tf.constant({texts!r}))
print(json.dumps({{key: out[key].numpy().tolist() for key in
                  ("entity_text", "entity_type", "entity_start", "entity_end", "tags", "words")}}, default=lambda b: b.decode()))
""")
    from electra_tf.finetuning.text.entities import entities

    for row, text in enumerate(texts):
        words = [w for w in served["words"][row] if w]
        tags = [t or "O" for t in served["tags"][row][:len(words)]]
        found = [(e_type, start, end, e_text) for e_type, start, end, e_text in zip(
            served["entity_type"][row], served["entity_start"][row], served["entity_end"][row],
            served["entity_text"][row]) if start >= 0]
        assert all(text[start:end] == e_text for _, start, end, e_text in found), (text, found)
        assert [(kind, words[first:last]) for kind, first, last in entities(tags)] == \
            [(kind, e_text.split()) for kind, _, _, e_text in found]
    assert served["entity_start"][0] == [] or all(v == -1 for v in served["entity_start"][0])


@pytest.mark.parametrize("extra, message", [
    (["--tagging", "--task", "MRPC"], "--task MRPC is a classification task, and the command also asks for --kind "
                                      "tagging: give one"),
    (["--task", "squad", "--strict_entities"], "--strict_entities is an option of tagging runs; this is a "
                                               "question_answering run"),
    (["--kind", "counting"], "--kind counting: not a kind of fine-tuning run; kinds: classification, "
                             "prompt, question_answering, tagging"),
    (["--task", "imdb"], "--task 'imdb' is not a task any kind runs; known: CoLA, conll2003, MNLI, MRPC"),
])
def test_option_combinations_refused(tmp_path, capsys, extra, message):
    assert finetune.main(["--pretrained", "x", "--train", "a", "--eval", "b", "--output_dir", str(tmp_path / "o"),
                          *extra]) == 2
    assert message in capsys.readouterr().err

