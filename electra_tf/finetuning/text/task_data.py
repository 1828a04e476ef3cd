"""Labelled data for fine-tuning: your own CSV / TSV / JSONL files, the GLUE TSV layouts, or
tagging files (CoNLL columns, or JSONL with a word list and a tag list per line).

    read_task_files(train, eval, columns=Columns("text", None, "label"))   # your files
    read_task_files(train, eval, glue_task=GLUE_TASKS["mrpc"])              # GLUE layouts
    read_tagging_files(train, eval)                                         # word tags

return a `TaskData`: train and eval `Examples` (texts, optional text pairs, label ids or
scaled scores) and the `LabelSpace` (class names, or the score range of a regression).

GLUE layouts follow the official fine-tuning code (column positions, label lists, metrics);
WNLI, which ELECTRA's code leaves out, uses its GLUE layout (index, sentence1, sentence2,
label). Regression targets are scaled to [0, 1] by (y - low) / (high - low) with STS-B's
(0, 5) range, as the official code does; for your own files the range is the training
labels' minimum and maximum. Exports map predictions back to the original scale.

Every problem in a file is a `TaskDataError` naming the file, the line and the column.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from electra_tf.utils.errors import ElectraError


class TaskDataError(ElectraError):
    pass


@dataclass(frozen=True)
class Columns:
    """The columns (fields) of your own files."""

    text: str = "text"
    text_pair: str | None = None
    label: str = "label"


@dataclass(frozen=True)
class GlueTask:
    name: str
    text: int
    text_pair: int | None
    label: int
    labels: tuple | None        # None: regression
    metrics: tuple
    header: bool = True
    score_range: tuple | None = None


GLUE_TASKS = {task.name.lower().replace("-", ""): task for task in (
    GlueTask("CoLA", 3, None, 1, ("0", "1"), ("mcc",), header=False),
    GlueTask("SST-2", 0, None, 1, ("0", "1"), ("accuracy",)),
    GlueTask("MRPC", 3, 4, 0, ("0", "1"), ("f1", "accuracy")),
    GlueTask("STS-B", -3, -2, -1, None, ("pearson", "spearman"), score_range=(0.0, 5.0)),
    GlueTask("QQP", 3, 4, 5, ("0", "1"), ("accuracy", "f1")),
    GlueTask("MNLI", 8, 9, -1, ("contradiction", "entailment", "neutral"), ("accuracy",)),
    GlueTask("QNLI", 1, 2, 3, ("entailment", "not_entailment"), ("accuracy",)),
    GlueTask("RTE", 1, 2, 3, ("entailment", "not_entailment"), ("accuracy",)),
    GlueTask("WNLI", 1, 2, 3, ("0", "1"), ("accuracy",)),
)}


def _glue_key(name: str) -> str:
    key = name.lower().replace("-", "").replace("_", "")
    return {"sst": "sst2", "sts": "stsb"}.get(key, key)


def is_glue_task(name: str) -> bool:
    """`name` names a GLUE task (any case, with or without its dash: MRPC, sst-2, STSB)."""
    return _glue_key(name) in GLUE_TASKS


def glue_task(name: str) -> GlueTask:
    key = _glue_key(name)
    if key not in GLUE_TASKS:
        raise TaskDataError(f"--task {name!r} is not a GLUE task; choose one of "
                            f"{', '.join(t.name for t in GLUE_TASKS.values())}.")
    return GLUE_TASKS[key]


@dataclass
class Examples:
    texts: list           # strings; for tagging, lists of words
    text_pairs: list | None
    labels: list          # class ids (int) or scaled scores (float); for tagging, lists of tag ids
    source: str

    def __len__(self):
        return len(self.texts)


def sample_shots(examples: Examples, names: list, shots: int, seed: int) -> Examples:
    """`shots` examples of each class, drawn with `seed` (the same draw for every kind and
    model, so few-shot methods compare on the same examples), in the file's order.

    >>> data = Examples(["a", "b", "c", "d", "e"], None, [0, 1, 0, 1, 0], "train.csv")
    >>> sample_shots(data, ["x", "y"], 2, seed=0).texts
    ['b', 'c', 'd', 'e']
    >>> sample_shots(data, ["x", "y"], 3, seed=0)
    Traceback (most recent call last):
    ...
    electra_tf.finetuning.text.task_data.TaskDataError: train.csv: --shots 3 asks for 3 examples of each class; class 'y' has 2. Lower --shots.
    """
    by_class = [[i for i, label in enumerate(examples.labels) if label == c] for c in range(len(names))]
    for name, members in zip(names, by_class):
        if len(members) < shots:
            raise TaskDataError(f"{examples.source}: --shots {shots} asks for {shots} examples of each class; class "
                                f"{name!r} has {len(members)}. Lower --shots.")
    generator = np.random.default_rng(seed)
    kept = sorted(int(i) for members in by_class for i in generator.choice(members, shots, replace=False))
    return Examples([examples.texts[i] for i in kept],
                    None if examples.text_pairs is None else [examples.text_pairs[i] for i in kept],
                    [examples.labels[i] for i in kept], examples.source)


def to_unit_interval(score, score_range: tuple):
    """A regression target -> the training scale [0, 1] (the official STS-B divides by 5).
    Works on numbers and tensors; `from_unit_interval` is the inverse, used by exports."""
    low, high = score_range
    return (score - low) / (high - low)


def from_unit_interval(prediction, score_range: tuple):
    """A regression model's output -> the original scale of `score_range`."""
    low, high = score_range
    return prediction * (high - low) + low


@dataclass
class LabelSpace:
    names: list | None = None               # classification
    score_range: tuple | None = None        # regression: (low, high) of the original scale
    metrics: tuple = field(default_factory=tuple)
    origin: str = ""                        # where the names come from, for errors (default: the training file)

    @property
    def num_classes(self) -> int:
        return 1 if self.names is None else len(self.names)


@dataclass
class TaskData:
    train: Examples | None  # None: evaluating a fine-tuned model only
    eval: Examples
    labels: LabelSpace
    name: str


@dataclass
class _Row:
    line: int
    text: object
    text_pair: object
    label: object


def read_task_files(train_path, eval_path, columns: Columns | None = None,
                    glue: GlueTask | None = None, regression: bool = False) -> TaskData:
    """Reads and checks both files; class names come from the training file (or GLUE)."""
    train_path = Path(train_path)
    train_rows = _labelled_rows(train_path, columns, glue)
    space = label_space(train_path, train_rows, glue, regression, columns)
    return TaskData(_examples(train_path, train_rows, space, columns, glue),
                    read_examples(eval_path, space, columns, glue), space, glue.name if glue else task_name(train_path))


def read_examples(path, space: LabelSpace, columns: Columns | None = None, glue: GlueTask | None = None) -> Examples:
    """Another file of the task (evaluation, test) read with the labels of its training file
    or of a fine-tuned model (`space`)."""
    path = Path(path)
    return _examples(path, _labelled_rows(path, columns, glue), space, columns, glue)


def default_metrics(names: list | None, glue: GlueTask | None = None) -> tuple:
    """The metrics of a task: GLUE's official ones; accuracy and the second class's F1 for two
    classes, accuracy and macro F1 for more; Pearson and Spearman for a score (`names` None)."""
    if glue is not None:
        return glue.metrics
    if names is None:
        return ("pearson", "spearman")
    return ("accuracy", "f1") if len(names) == 2 else ("accuracy", "macro_f1")


def label_space(train_path: Path, train_rows: list, glue: GlueTask | None, regression: bool,
                columns: Columns | None) -> LabelSpace:
    """Class names (GLUE's, or the training file's in order) or the score range of a regression."""
    if (glue is not None and glue.labels is None) or (glue is None and regression):
        low, high = glue.score_range if glue else _score_range(train_path, train_rows, _label_column(columns, glue))
        return LabelSpace(score_range=(low, high), metrics=default_metrics(None, glue))
    names = list(glue.labels) if glue else _class_names(train_rows)
    return LabelSpace(names=names, metrics=default_metrics(names, glue))


def _label_column(columns: Columns | None, glue: GlueTask | None) -> str:
    return "the label column" if glue else f"column {columns.label!r}"


def _labelled_rows(path: Path, columns: Columns | None, glue: GlueTask | None) -> list:
    if glue is None and columns is None:
        raise ValueError("give the columns of your files, or a GLUE task.")
    rows = _read_glue(path, glue) if glue is not None else _read_named(path, columns)
    if not rows:
        raise TaskDataError(f"{path}: no examples.")
    _check_label_types(path, rows, _label_column(columns, glue))
    return rows


def _examples(path: Path, rows: list, space: LabelSpace, columns: Columns | None, glue: GlueTask | None) -> Examples:
    pairs = glue.text_pair is not None if glue is not None else columns.text_pair is not None
    column = _label_column(columns, glue)
    if space.names is None:
        labels = [to_unit_interval(_require_number(path, row, column), space.score_range) for row in rows]
    else:
        index = {name: i for i, name in enumerate(space.names)}
        where = f"GLUE {glue.name}" if glue else space.origin or "the training file (or the fine-tuned model)"
        labels = []
        for row in rows:
            key = _label_text(row.label)
            if key not in index:
                raise TaskDataError(f"{path}, line {row.line}: label {key!r} in {column} is not one of the labels of "
                                    f"{where}: {space.names}. Remove the row, or add examples of that label to the "
                                    "training file.")
            labels.append(index[key])
    return Examples([r.text for r in rows], [r.text_pair for r in rows] if pairs else None, labels, str(path))


# Names that say where a file sits or what split it is, not what task it holds.
_GENERIC_NAMES = {"train", "training", "dev", "eval", "valid", "validation", "test", "data", "dataset", "datasets",
                  "corpus", "input", "inputs", "files", "tmp", "temp", "labelled", "labeled", ""}


def task_name(train_path: Path) -> str:
    """The training file's name, or its folder's when the file is `train.csv` and the like;
    "" when both are generic (`data/train.csv`): the run then names the task after its output folder.

    >>> task_name(Path("glue/sst2/train.tsv")), task_name(Path("reviews.csv")), task_name(Path("data/train.csv"))
    ('sst2', 'reviews', '')
    """
    for name in (train_path.stem, train_path.resolve().parent.name):
        if name.lower() not in _GENERIC_NAMES:
            return name
    return ""


# --- tagging ----------------------------------------------------------------------------

def read_tagging_files(train_path, eval_path, columns: Columns | None = None) -> TaskData:
    """Word-level tags (part of speech, named-entity BIO tags, chunks) from two files.

    CoNLL layout (any suffix but .jsonl): one word per line, whitespace-separated columns,
    the word first and its tag last, a blank line after each sentence; `-DOCSTART-` lines
    (CoNLL-2003) are skipped. JSONL: one sentence per line, a list of words in
    `columns.text` and a list of as many tags in `columns.label` (the HuggingFace datasets
    layout, e.g. `--text_column tokens --label_column ner_tags`).

    Tag names are the training file's, sorted, then any the eval file adds: a tag never seen
    in training cannot be predicted, so its words count as errors, as they should.

    Example:
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / "train.conll").write_text("The DT\\ncat NN\\n\\nDogs NNS\\nbark VBP\\n")
    >>> _ = (folder / "dev.conll").write_text("A DT\\ndog NN\\nbarked VBD\\n")
    >>> task = read_tagging_files(folder / "train.conll", folder / "dev.conll")
    >>> task.labels.names, task.train.texts, task.eval.labels
    (['DT', 'NN', 'NNS', 'VBP', 'VBD'], [['The', 'cat'], ['Dogs', 'bark']], [[0, 1, 4]])
    """
    train_path, eval_path = Path(train_path), Path(eval_path)
    columns = columns or TAGGING_COLUMNS
    train_rows, eval_rows = _tagged_rows(train_path, columns), _tagged_rows(eval_path, columns)
    names = sorted({tag for row in train_rows for tag in row.label})
    if len(names) < 2:
        raise TaskDataError(f"{train_path}: every word has the tag {names[0]!r}: nothing to learn.")
    names += sorted({tag for row in eval_rows for tag in row.label} - set(names))
    space = LabelSpace(names=names, metrics=("accuracy",))
    return TaskData(_tagged_examples(train_path, train_rows, names), _tagged_examples(eval_path, eval_rows, names),
                    space, task_name(train_path))


def read_tagged_examples(path, names: list, columns: Columns | None = None) -> Examples:
    """Another tagging file (evaluation, test) with the tags of a training file or a model
    (`names`); a tag outside them becomes "O" (or the first tag), so its words count as errors."""
    path = Path(path)
    return _tagged_examples(path, _tagged_rows(path, columns or TAGGING_COLUMNS), names)


TAGGING_COLUMNS = Columns("tokens", None, "tags")  # JSON Lines fields, HuggingFace datasets' names


def _tagged_rows(path: Path, columns: Columns) -> list:
    rows = _read_tagged(path, columns)
    if not rows:
        raise TaskDataError(f"{path}: no sentences.")
    return rows


def _tagged_examples(path: Path, rows: list, names: list) -> Examples:
    index = {name: i for i, name in enumerate(names)}
    unknown = index.get("O", 0)
    return Examples([row.text for row in rows], None, [[index.get(t, unknown) for t in row.label] for row in rows],
                    str(path))


def _read_tagged(path: Path, columns: Columns) -> list:
    """[_Row(line of the sentence's first word, words, None, tags)]."""
    try:
        with _open(path) as handle:
            if path.suffix.lower() in (".jsonl", ".json", ".ndjson"):
                return [_tagged_record(path, line, record, columns) for line, record in _jsonl_records(path, handle)]
            return _conll_sentences(path, handle)
    except UnicodeDecodeError as error:
        raise TaskDataError(f"{path}: not UTF-8 ({error}). Re-save the file as UTF-8.") from None


def _conll_sentences(path: Path, handle) -> list:
    rows, words, tags, first = [], [], [], None
    for line, text in enumerate(handle, start=1):
        cells = text.split()
        if cells and cells[0] == "-DOCSTART-":
            continue
        if not cells:
            if words:
                rows.append(_Row(first, words, None, tags))
            words, tags = [], []
            continue
        if len(cells) < 2:
            raise TaskDataError(f"{path}, line {line}: {text.strip()!r} has no tag column; tagging files "
                                "have the word first and its tag last on each line, a blank line between "
                                "sentences.")
        first = line if not words else first
        words.append(cells[0])
        tags.append(cells[-1])
    if words:
        rows.append(_Row(first, words, None, tags))
    return rows


def _tagged_record(path: Path, line: int, record: dict, columns: Columns) -> _Row:
    values = []
    for column in (columns.text, columns.label):
        value = record.get(column)
        if not isinstance(value, list) or not value:
            raise TaskDataError(f"{path}, line {line}: {column!r} must be a non-empty list, got {value!r}. "
                                "Pass the right --text_column / --label_column.")
        values.append(value)
    words, tags = values
    if len(words) != len(tags):
        raise TaskDataError(f"{path}, line {line}: {len(words)} words in {columns.text!r} but {len(tags)} "
                            f"tags in {columns.label!r}; each word needs one tag.")
    for word in words:
        if not isinstance(word, str) or not word.strip():
            raise TaskDataError(f"{path}, line {line}: word {word!r} in {columns.text!r} is not a non-empty string.")
    if any(not isinstance(tag, (str, int)) or isinstance(tag, bool) for tag in tags):
        raise TaskDataError(f"{path}, line {line}: tags in {columns.label!r} must be strings or integers.")
    return _Row(line, words, None, [str(tag) for tag in tags])


# --- reading --------------------------------------------------------------------------

def file_format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".csv", ".tsv"):
        return suffix[1:]
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    raise TaskDataError(f"{path}: unknown format {suffix!r}; use .csv, .tsv or .jsonl.")


def _open(path: Path):
    if not path.is_file():
        raise TaskDataError(f"{path} does not exist.")
    return open(path, newline="", encoding="utf-8-sig")


def _read_named(path: Path, columns: Columns) -> list:
    wanted = [c for c in (columns.text, columns.text_pair, columns.label) if c is not None]
    rows = []
    try:
        with _open(path) as handle:
            kind = file_format(path)
            if kind == "jsonl":
                records = _jsonl_records(path, handle)
                available = None
            else:
                reader = csv.DictReader(handle, delimiter="\t" if kind == "tsv" else ",")
                available = reader.fieldnames or []
                if not available:
                    raise TaskDataError(f"{path} is empty: it needs a header row naming its columns "
                                        f"({', '.join(wanted)}), then one example per line.")
                missing = [c for c in wanted if c not in available]
                if missing:
                    raise TaskDataError(f"{path}: no column {missing[0]!r}; the header has {available}. "
                                        "Pass the right --text_column / --text_pair_column / --label_column.")
                records = _csv_records(reader)
            for line, record in records:
                if available is None:
                    missing = [c for c in wanted if c not in record]
                    if missing:
                        raise TaskDataError(f"{path}, line {line}: no field {missing[0]!r}; the record has "
                                            f"{sorted(record)}.")
                elif None in record or any(record[c] is None for c in wanted):
                    _refuse_row_shape(path, line, record, len(available))
                rows.append(_row(path, line, record[columns.text],
                                 record[columns.text_pair] if columns.text_pair else None,
                                 record[columns.label], columns))
    except UnicodeDecodeError as error:
        raise TaskDataError(f"{path}: not UTF-8 ({error}). Re-save the file as UTF-8.") from None
    except csv.Error as error:
        raise TaskDataError(f"{path}: malformed CSV ({error}).") from None
    return rows


def _csv_records(reader):
    """(the line a record starts on, the record) of a csv.DictReader."""
    start = reader.line_num + 1
    for record in reader:
        yield start, record
        start = reader.line_num + 1


def _refuse_row_shape(path: Path, line: int, record: dict, columns: int) -> None:
    """A row with more or fewer cells than the header; fewer, with a cell running over several
    lines to the end, is a quoted field never closed (a missing quote, or a file cut short)."""
    if None not in record and any("\n" in value for value in record.values() if isinstance(value, str)):
        raise TaskDataError(f"{path}, line {line}: a quoted field opens on this line and is never closed (the file "
                            "ends inside it): a closing quote is missing, or the file was cut short.")
    raise TaskDataError(f"{path}, line {line}: the row has {'more' if None in record else 'fewer'} cells than the "
                        f"header's {columns} columns.")


def _jsonl_records(path: Path, handle):
    for line, text in enumerate(handle, start=1):
        if not text.strip():
            raise TaskDataError(f"{path}, line {line}: empty line; remove it.")
        try:
            record = json.loads(text)
        except json.JSONDecodeError as error:
            raise TaskDataError(f"{path}, line {line}: not JSON ({error.msg}).") from None
        if not isinstance(record, dict):
            raise TaskDataError(f"{path}, line {line}: expected a JSON object, got {type(record).__name__}.")
        yield line, record


def _row(path, line, text, text_pair, label, columns: Columns) -> _Row:
    names = (columns.text, columns.text_pair, columns.label)
    for value, column in ((text, names[0]), (text_pair, names[1])):
        if column is None:
            continue
        if not isinstance(value, str):
            raise TaskDataError(f"{path}, line {line}: {column!r} must be text, got {value!r}.")
        if not value.strip():
            raise TaskDataError(f"{path}, line {line}: {column!r} is empty; remove the row or fill it in.")
    if label is None or (isinstance(label, str) and not label.strip()):
        raise TaskDataError(f"{path}, line {line}: the label ({names[2]!r}) is empty; remove the row or label it.")
    if not isinstance(label, (str, int, float)):  # bool is an int: true/false labels are fine
        raise TaskDataError(f"{path}, line {line}: label {label!r} is neither text nor a number.")
    return _Row(line, text, text_pair, label.strip() if isinstance(label, str) else label)


def _read_glue(path: Path, task: GlueTask) -> list:
    rows = []
    names = Columns(f"column {task.text}", None if task.text_pair is None else f"column {task.text_pair}",
                    f"column {task.label}")
    needed = max(c if c >= 0 else -c for c in (task.text, task.text_pair or 0, task.label)) + 1
    try:
        with _open(path) as handle:
            for line, cells in enumerate(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE), start=1):
                if line == 1 and task.header:
                    continue
                if not any(cell.strip() for cell in cells):
                    raise TaskDataError(f"{path}, line {line}: empty row; remove it.")
                if len(cells) < needed:
                    raise TaskDataError(f"{path}, line {line}: {len(cells)} columns, but the GLUE {task.name} "
                                        f"layout needs {needed}. Is this the {task.name} train/dev TSV?")
                rows.append(_row(path, line, cells[task.text],
                                 cells[task.text_pair] if task.text_pair is not None else None,
                                 cells[task.label], names))
    except UnicodeDecodeError as error:
        raise TaskDataError(f"{path}: not UTF-8 ({error}).") from None
    return rows


# --- labels -------------------------------------------------------------------------

def _number(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _label_text(value) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _check_label_types(path: Path, rows: list, column: str) -> None:
    """One kind of label per column: all numbers, or all words (mixed usually means shifted
    columns or a stray header)."""
    numeric = [r for r in rows if _number(r.label) is not None]
    if numeric and len(numeric) < len(rows):
        word = next(r for r in rows if _number(r.label) is None)
        raise TaskDataError(
            f"{path}: {column} mixes numbers (e.g. line {numeric[0].line}: {numeric[0].label!r}) and text "
            f"(e.g. line {word.line}: {word.label!r}). Use one kind of label throughout.")


def _class_names(rows: list) -> list:
    names = {_label_text(r.label) for r in rows}
    if len(names) < 2:
        raise TaskDataError(f"the training file has a single label ({names.pop()!r}): nothing to learn.")
    numeric = all(_number(n) is not None for n in names)
    return sorted(names, key=(lambda n: float(n)) if numeric else None)


def _score_range(path: Path, rows: list, column: str) -> tuple:
    scores = [_require_number(path, r, column) for r in rows]
    low, high = min(scores), max(scores)
    if low == high:
        raise TaskDataError(f"{path}: every regression label is {low}: nothing to learn.")
    return low, high


def _require_number(path: Path, row: _Row, column: str) -> float:
    number = _number(row.label)
    if number is None:
        raise TaskDataError(f"{path}, line {row.line}: {column} holds {row.label!r}, but a regression "
                            "task needs numbers.")
    return number
