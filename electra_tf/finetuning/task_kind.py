"""What a kind of task gives the one fine-tuning run: `TaskKind` (`run.task_kind(options)`
picks one).

The run (`run.py`: options, runtime, optimizer, epochs, the best epoch, metrics.json,
TensorBoard, export, the lock) is written once. Each kind supplies the rest:

- `text.kinds.ClassificationKind`: classes, sentence pairs, regression, GLUE;
- `text.kinds.TaggingKind`: a tag per word (entity tags scored by entity too);
- `question_answering.kind.QuestionAnsweringKind`: extractive question answering (SQuAD 1.1 / 2.0).
"""

from __future__ import annotations


class TaskKind:
    """One kind of task, read from its files. Subclasses set `name` (the task's, for the
    summary and the export), `train_examples` (what one epoch goes through: texts, sentences or
    question windows) and `metric_names` (what metrics.json's `eval` reports, in order)."""

    name: str
    train_examples: int
    eval_examples: int
    metric_names: tuple
    # What the counts count, named in the log and in metrics.json.
    train_unit: str = "examples"
    eval_unit: str = "examples"

    def default_epochs(self) -> int:
        raise NotImplementedError

    def datasets(self, tokenizer, max_seq_length: int, batch_size: int, seed: int):
        """Prepares the data; returns the training dataset of (inputs, labels) batches."""
        raise NotImplementedError

    def build_model(self, backbone, config, tokenizer, max_seq_length: int):
        """The task model on `backbone` (inside the strategy's scope)."""
        raise NotImplementedError

    def evaluate(self, model) -> tuple[dict, dict]:
        """(metrics with `score`, {file name: text} the best epoch leaves in OUTPUT_DIR)."""
        raise NotImplementedError

    def test(self, model) -> tuple[dict, dict]:
        """Like `evaluate`, on the `--test` file, with the best epoch (kinds that support it)."""
        from electra_tf.utils.errors import RunError

        raise RunError("--test is supported for --tagging runs (and --task conll2003) so far.")

    def describe(self) -> str | None:
        """A line printed before training, beyond the counts every task prints."""
        return None

    def summary(self) -> dict:
        """Fields metrics.json adds for this kind."""
        return {}
