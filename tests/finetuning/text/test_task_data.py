"""Reading labelled files: formats, GLUE layouts, and every bad input with a clear error."""

import json

import pytest

from electra_tf.finetuning.text.task_data import (GLUE_TASKS, Columns, TaskDataError, from_unit_interval, glue_task,
                                                  read_task_files, to_unit_interval)

COLUMNS = Columns("text", None, "label")


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_tsv_and_jsonl_read_the_same(tmp_path):
    rows = [("a good film", "pos"), ("a dull film, sadly", "neg"), ("fine \"quoted\" text", "pos")]
    csv_text = "text,label\n" + "".join(f'"{t.replace(chr(34), chr(34) * 2)}",{l}\n' for t, l in rows)
    tsv_text = "text\tlabel\n" + "".join(f'"{t.replace(chr(34), chr(34) * 2)}"\t{l}\n' for t, l in rows)
    jsonl_text = "".join(json.dumps({"text": t, "label": l, "extra": 1}) + "\n" for t, l in rows)
    results = []
    for name, text in (("d.csv", csv_text), ("d.tsv", tsv_text), ("d.jsonl", jsonl_text)):
        path = write(tmp_path / name, text)
        results.append(read_task_files(path, path, COLUMNS))
    for data in results:
        assert data.train.texts == [t for t, _ in rows]
        assert data.labels.names == ["neg", "pos"] and data.train.labels == [1, 0, 1]
        assert data.labels.metrics == ("accuracy", "f1")


def test_pairs_numeric_labels_and_regression(tmp_path):
    path = write(tmp_path / "p.csv", "q,a,y\nwho,me,2\nwhat,that,10\nwhy,because,1\n")
    data = read_task_files(path, path, Columns("q", "a", "y"))
    assert data.labels.names == ["1", "2", "10"]  # numeric order, not string order
    assert data.train.text_pairs == ["me", "that", "because"] and data.train.labels == [1, 2, 0]
    assert data.labels.metrics == ("accuracy", "macro_f1")
    scores = read_task_files(path, path, Columns("q", "a", "y"), regression=True)
    assert scores.labels.score_range == (1.0, 10.0) and scores.labels.num_classes == 1
    assert scores.train.labels == pytest.approx([1 / 9, 1.0, 0.0])


def test_an_eval_label_unseen_in_training(tmp_path):
    train = write(tmp_path / "train.csv", "text,label\nx,a\ny,b\n")
    dev = write(tmp_path / "dev.csv", "text,label\nx,a\nz,c\n")
    with pytest.raises(TaskDataError, match=r"dev.csv, line 3: label 'c' .* not one of .*\['a', 'b'\]"):
        read_task_files(train, dev, COLUMNS)


def test_a_missing_column(tmp_path):
    path = write(tmp_path / "d.csv", "sentence,label\nx,a\ny,b\n")
    with pytest.raises(TaskDataError, match=r"d.csv: no column 'text'; the header has \['sentence', 'label'\]"):
        read_task_files(path, path, COLUMNS)
    jsonl = write(tmp_path / "d.jsonl", '{"text": "x", "label": "a"}\n{"text": "y"}\n')
    with pytest.raises(TaskDataError, match=r"d.jsonl, line 2: no field 'label'"):
        read_task_files(jsonl, jsonl, COLUMNS)


@pytest.mark.parametrize("content,message", [
    ("text,label\nx,a\n,b\n", r"line 3: 'text' is empty"),
    ("text,label\nx,a\n   ,b\n", r"line 3: 'text' is empty"),
    ("text,label\nx,a\ny,\n", r"line 3: the label \('label'\) is empty"),
    ("text,label\nx,a\n\ny,b\nz\n", r"line 5: the row has fewer cells"),
    ("text,label\n", r"no examples"),
])
def test_empty_rows(tmp_path, content, message):
    path = write(tmp_path / "d.csv", content)
    with pytest.raises(TaskDataError, match=message):
        read_task_files(path, path, COLUMNS)


def test_empty_jsonl_line(tmp_path):
    path = write(tmp_path / "d.jsonl", '{"text": "x", "label": 1}\n\n{"text": "y", "label": 0}\n')
    with pytest.raises(TaskDataError, match="d.jsonl, line 2: empty line"):
        read_task_files(path, path, COLUMNS)


def test_a_label_column_of_mixed_types(tmp_path):
    path = write(tmp_path / "d.jsonl", '{"text": "x", "label": 1}\n{"text": "y", "label": "positive"}\n')
    with pytest.raises(TaskDataError, match=r"d.jsonl: column 'label' mixes numbers \(e.g. line 1: 1\) "
                                            r"and text \(e.g. line 2: 'positive'\)"):
        read_task_files(path, path, COLUMNS)
    csv_path = write(tmp_path / "d.csv", "text,label\nx,0\ny,1\nz,label\n")
    with pytest.raises(TaskDataError, match="mixes numbers"):
        read_task_files(csv_path, csv_path, COLUMNS)
    regression = write(tmp_path / "r.csv", "text,label\nx,0.5\ny,1.5\n")
    bad = write(tmp_path / "bad.csv", "text,label\ny,high\nz,low\n")
    with pytest.raises(TaskDataError, match=r"bad.csv, line 2: column 'label' holds 'high'"):
        read_task_files(regression, bad, COLUMNS, regression=True)


def test_unknown_format_and_missing_file(tmp_path):
    with pytest.raises(TaskDataError, match="does not exist"):
        read_task_files(tmp_path / "none.csv", tmp_path / "none.csv", COLUMNS)
    path = write(tmp_path / "d.txt", "x")
    with pytest.raises(TaskDataError, match="unknown format '.txt'"):
        read_task_files(path, path, COLUMNS)


GLUE_SAMPLES = {
    # (file content, expected texts, expected pairs, expected labels)
    "CoLA": ("gj04\t1\t\tThe sailors rode the breeze clear of the rocks.\ngj04\t0\t*\tThe more we study.\n",
             ["The sailors rode the breeze clear of the rocks.", "The more we study."], None, [1, 0]),
    "SST-2": ("sentence\tlabel\nit 's a charming journey . \t1\nunfunny \t0\n",
              ["it 's a charming journey . ", "unfunny "], None, [1, 0]),
    "MRPC": ("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t702876\t702977\tHe said.\tHe stated.\n"
             "0\t2108705\t2108831\tYes.\tNo.\n", ["He said.", "Yes."], ["He stated.", "No."], [1, 0]),
    "STS-B": ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
              "0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA plane.\tAn air plane.\t5.000\n"
              "1\tmain-captions\tMSRvid\t2012test\t0004\tnone\tnone\tA man.\tA cat.\t0.500\n",
              ["A plane.", "A man."], ["An air plane.", "A cat."], [1.0, 0.1]),
    "QQP": ("id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n1\t1\t2\tWhy?\tHow come?\t1\n"
            "2\t3\t4\tWhere?\tWhen?\t0\n", ["Why?", "Where?"], ["How come?", "When?"], [1, 0]),
    "MNLI": ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
             "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label\n"
             "0\t1\t1n\tgov\t(a)\t(b)\t(A)\t(B)\tIt rains.\tIt is dry.\tcontradiction\tcontradiction\n"
             "1\t2\t2e\tgov\t(a)\t(b)\t(A)\t(B)\tIt rains.\tIt is wet.\tentailment\tentailment\n",
             ["It rains.", "It rains."], ["It is dry.", "It is wet."], [0, 1]),
    "QNLI": ("index\tquestion\tsentence\tlabel\n0\tWho?\tHim.\tentailment\n1\tWhat?\tNo.\tnot_entailment\n",
             ["Who?", "What?"], ["Him.", "No."], [0, 1]),
    "RTE": ("index\tsentence1\tsentence2\tlabel\n0\tA b.\tB.\tnot_entailment\n1\tC d.\tC.\tentailment\n",
            ["A b.", "C d."], ["B.", "C."], [1, 0]),
    "WNLI": ("index\tsentence1\tsentence2\tlabel\n0\tI poured it.\tIt was full.\t1\n1\tX.\tY.\t0\n",
             ["I poured it.", "X."], ["It was full.", "Y."], [1, 0]),
}


@pytest.mark.parametrize("name", sorted(GLUE_SAMPLES))
def test_glue_layouts(tmp_path, name):
    content, texts, pairs, labels = GLUE_SAMPLES[name]
    path = write(tmp_path / "dev.tsv", content)
    data = read_task_files(path, path, glue=glue_task(name))
    assert data.train.texts == texts and data.train.text_pairs == pairs
    assert data.train.labels == pytest.approx(labels)
    assert data.name == name


def test_glue_task_names_and_metrics():
    assert glue_task("sst2") is glue_task("SST-2") is glue_task("sst")
    assert glue_task("CoLA").metrics == ("mcc",) and glue_task("sts-b").metrics == ("pearson", "spearman")
    assert glue_task("MRPC").metrics == ("f1", "accuracy") and glue_task("qqp").metrics == ("accuracy", "f1")
    assert len(GLUE_TASKS) == 9
    with pytest.raises(TaskDataError, match="not a GLUE task"):
        glue_task("squad")


def test_glue_rows_with_too_few_columns(tmp_path):
    path = write(tmp_path / "train.tsv", "index\tquestion\tsentence\tlabel\n0\tWho?\tentailment\n")
    with pytest.raises(TaskDataError, match=r"train.tsv, line 2: 3 columns, but the GLUE QNLI layout needs 4"):
        read_task_files(path, path, glue=glue_task("qnli"))


def test_regression_scaling_and_its_inverse():
    import numpy as np
    import tensorflow as tf

    assert to_unit_interval(3.8, (0.0, 5.0)) == pytest.approx(0.76)  # official STS-B: label / 5
    assert to_unit_interval(-2.0, (-2.0, 6.0)) == 0.0 and to_unit_interval(6.0, (-2.0, 6.0)) == 1.0
    scores = np.array([-2.0, 0.5, 6.0])
    np.testing.assert_allclose(from_unit_interval(to_unit_interval(scores, (-2.0, 6.0)), (-2.0, 6.0)), scores)
    # The export applies the inverse to a float32 tensor.
    np.testing.assert_allclose(from_unit_interval(tf.constant([0.0, 0.25, 1.0]), (-2.0, 6.0)).numpy(),
                               [-2.0, 0.0, 6.0])


def test_an_empty_file_is_called_empty(tmp_path):
    """Before: "no column 'text'; the header has []"."""
    empty = tmp_path / "train.csv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(TaskDataError, match="train.csv is empty: it needs a header row naming its columns"):
        read_task_files(empty, empty, COLUMNS)


def test_a_csv_cut_inside_a_quoted_field_is_called_an_unclosed_quote(tmp_path):
    """Before: "the row has fewer cells than the header's 2 columns"."""
    cut = tmp_path / "train.csv"
    cut.write_text('text,label\n"good film",pos\n"bad film",neg\n"a film that never\nends here,pos\n', encoding="utf-8")
    with pytest.raises(TaskDataError, match="train.csv, line 4: a quoted field opens on this line and is never closed"):
        read_task_files(cut, cut, COLUMNS)
    short = tmp_path / "dev.csv"
    short.write_text('text,label\n"good film",pos\n"bad film"\n', encoding="utf-8")
    with pytest.raises(TaskDataError, match="dev.csv, line 3: the row has fewer cells than the header's 2 columns"):
        read_task_files(short, short, COLUMNS)
