"""The kind `question_answering` (`--task squad`): extractive question answering as a task of the
one trainer: SQuAD files in, `ElectraQuestionAnswerer` trained on their windows, the official
scores out, and `predictions.json` (and `null_odds.json` for 2.0) beside the best epoch. See
`finetuning/task.py`; the windows are `squad.make_windows`, the answers `answers`, the scores
`metrics`."""

from __future__ import annotations

import dataclasses
import json
import sys

import numpy as np
import tensorflow as tf

from electra_tf.finetuning.question_answering import metrics as qa_metrics
from electra_tf.finetuning.question_answering.answers import WindowBeam, best_answers
from electra_tf.finetuning.question_answering.model import ElectraQuestionAnswerer
from electra_tf.finetuning.question_answering.squad import (default_doc_stride, make_windows, read_squad,
                                                            tokenize_contexts, tokenize_texts)
from electra_tf.finetuning.task import FinetuningTask
from electra_tf.training.task import register_task
from electra_tf.utils.errors import RunError
from electra_tf.utils.progress import Progress, batch_progress
from electra_tf.utils.sections import Section, option

TASK_NAMES = ("squad", "squad1.1", "squad2.0")
OFFICIAL_EPOCHS = 2  # the official SQuAD recipe
# The official ELECTRA threshold on the null odds for SQuAD 2.0 (answer "" above it).
NULL_SCORE_THRESHOLD = -2.75
METRICS_V1 = ("exact_match", "f1")
METRICS_V2 = ("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1", "best_exact", "best_f1")
QA_HEADS = ("electra", "plain")


@dataclasses.dataclass(frozen=True)
class QuestionAnsweringConfig(Section):
    """Extractive question answering (SQuAD 1.1 / 2.0 files): the official windowing and
    answer settings, and the head (`electra`: the official one; `plain`: transformers')."""

    doc_stride: int | None = option(None, "word pieces between window starts (default: 128 at max_seq_length 512, "
                                          "half the length for shorter ones: 64 at 128)")
    max_query_length: int = option(64, "question word pieces kept")
    max_answer_length: int = option(30, "longest answer, in word pieces")
    qa_head: str = option("electra", "electra: the official head (end conditioned on the start, beam search, "
                                     "answerability for 2.0); plain: transformers' qa_outputs (start and end apart)",
                          choices=QA_HEADS)

    def check(self) -> None:
        self.at_least_one("doc_stride", "max_query_length", "max_answer_length")
        self.require(self.qa_head in QA_HEADS, "qa_head",
                     "must be electra (the official head) or plain (transformers' qa_outputs).")


@dataclasses.dataclass
class EvaluationPart:
    """A SQuAD file's questions, their windows and the windows' batches of ids."""

    file: object  # squad.SquadFile
    windows: list  # per question, its windows
    inputs: tf.data.Dataset


@dataclasses.dataclass
class SquadData:
    """The SQuAD files and, once prepared, their windows."""

    train: object  # squad.SquadFile (None evaluating only)
    eval: object
    version: str
    doc_stride: int | None = None
    train_windows: int = 0
    train_questions: int = 0
    skipped: int = 0  # training answers not found at their answer_start
    evaluation: EvaluationPart | None = None

    @property
    def name(self) -> str:
        return "squad" if self.version == "1.1" else "squad2"


@register_task("question_answering")
@dataclasses.dataclass(frozen=True)
class QuestionAnsweringTask(FinetuningTask):
    """Extractive question answering on SQuAD 1.1 / 2.0 files (--task squad)."""

    section = QuestionAnsweringConfig
    task_names = TASK_NAMES
    model_names = ("electra_tf>ElectraQuestionAnswerer",)
    train_unit, eval_unit = "windows", "questions"  # an epoch goes through windows; scores are per question

    def read_files(self, labels=None) -> SquadData:
        files = self.config.files
        train = read_squad(files.train, training=True) if labels is None else None
        evaluation = read_squad(files.eval, training=False)
        versions = (evaluation.version,) if train is None else (train.version, evaluation.version)
        return SquadData(train, evaluation, "2.0" if "2.0" in versions else "1.1")

    def default_epochs(self, data: SquadData) -> int:
        return OFFICIAL_EPOCHS

    def counts(self, data: SquadData) -> tuple[int, int]:
        return data.train_windows, len(data.eval.examples)

    def metric_names(self, data: SquadData) -> tuple:
        return METRICS_V1 if data.version == "1.1" else METRICS_V2

    def _windows(self, examples, tokenizer, max_seq_length, training, counts):
        config = self.config.task
        contexts = list(dict.fromkeys(example.context for example in examples))
        progress = Progress("windows", total=len(examples), unit="questions", stream=sys.stdout)
        tokenized = dict(zip(contexts, tokenize_contexts(contexts, tokenizer)))
        pieces_of = tokenize_texts([e.question for e in examples]
                                   + [text for e in examples for text, _ in e.answers[:1]], tokenizer)
        windows = []
        for number, example in enumerate(examples, 1):
            windows.append(make_windows(example, tokenizer, max_seq_length, config.doc_stride, config.max_query_length,
                                        training, counts, context=tokenized[example.context], pieces_of=pieces_of))
            if number % 500 == 0:
                progress.update(number)
        progress.finish(len(examples))
        return windows

    def prepare(self, data: SquadData, tokenizer, max_seq_length: int, seed: int):
        config = self.config.task
        if max_seq_length - config.max_query_length - 3 < 1:
            raise RunError(f"--max_query_length {config.max_query_length} leaves no room for the context in "
                           f"windows of {max_seq_length} pieces; lower it below {max_seq_length - 3}.")
        data = dataclasses.replace(data, doc_stride=config.doc_stride or default_doc_stride(max_seq_length),
                                   evaluation=self._part(data.eval, tokenizer, max_seq_length))
        if data.train is None:
            return None, data
        counts = {}
        per_question = self._windows(data.train.examples, tokenizer, max_seq_length, True, counts)
        train_windows = [w for ws in per_question for w in ws]
        # Answerability is the question's, as in the official code: a window of an answerable
        # question that lacks the answer is labelled [CLS] for the span, but not impossible.
        impossible = [example.is_impossible for example, ws in zip(data.train.examples, per_question) for _ in ws]
        train = _packed(train_windows, max_seq_length)
        labels = {"start_positions": np.array([w.start_position for w in train_windows], np.int32),
                  "end_positions": np.array([w.end_position for w in train_windows], np.int32),
                  "is_impossible": np.array(impossible, np.float32)}
        train["start_positions"] = labels["start_positions"]  # conditions the official head's end in training
        dataset = tf.data.Dataset.from_tensor_slices((train, labels))
        dataset = dataset.shuffle(len(train_windows), seed=seed, reshuffle_each_iteration=True).batch(
            self.config.run.update_batch_size)
        skipped = counts.get("skipped", 0)
        return dataset, dataclasses.replace(data, train_windows=len(train_windows),
                                            train_questions=len(data.train.examples) - skipped, skipped=skipped)

    def _part(self, squad_file, tokenizer, max_seq_length: int) -> EvaluationPart:
        windows = self._windows(squad_file.examples, tokenizer, max_seq_length, False, {})
        inputs = tf.data.Dataset.from_tensor_slices(_packed([w for ws in windows for w in ws], max_seq_length)).batch(
            self.config.run.update_batch_size)
        return EvaluationPart(squad_file, windows, inputs)

    def evaluation_part(self, path: str, data: SquadData, tokenizer, max_seq_length: int) -> EvaluationPart:
        return self._part(read_squad(path, training=False), tokenizer, max_seq_length)

    def build_task_model(self, backbone, data: SquadData, config):
        kind = self.config.task
        return ElectraQuestionAnswerer(backbone, head=kind.qa_head, answerable=data.version == "2.0",
                                       max_query_length=kind.max_query_length, doc_stride=data.doc_stride,
                                       max_answer_length=kind.max_answer_length)

    def answers(self, model, part: EvaluationPart):
        """{question id: QuestionAnswer} for an evaluation part's questions."""
        batches = part.inputs.cardinality().numpy()
        outputs = model.predict(part.inputs, verbose=0, callbacks=[batch_progress(
            "predicting", int(batches) if batches > 0 else None, "batches")])
        answers, row = {}, 0
        examples = part.file.examples
        progress = Progress("answers", total=len(examples), unit="questions", stream=sys.stdout)
        for number, (example, windows) in enumerate(zip(examples, part.windows), 1):
            if number % 500 == 0:
                progress.update(number)
            beams = []
            for _ in windows:
                beams.append(WindowBeam(
                    list(zip(outputs["start_top_index"][row].tolist(), outputs["start_top_log_probs"][row].tolist())),
                    [list(zip(i, p)) for i, p in zip(outputs["end_top_index"][row].tolist(),
                                                     outputs["end_top_log_probs"][row].tolist())],
                    float(outputs["answerable_logit"][row]) if "answerable_logit" in outputs else 0.0))
                row += 1
            answers[example.id] = best_answers(example, windows, beams,
                                               max_answer_length=self.config.task.max_answer_length)
        progress.finish(len(examples))
        return answers

    def score(self, model, data: SquadData, part: EvaluationPart):
        answers = self.answers(model, part)
        gold = {e.id: [text for text, _ in e.answers] for e in part.file.examples}
        predictions = {qid: answer.text for qid, answer in answers.items()}
        files = {"predictions.json": json.dumps(predictions, indent=2, ensure_ascii=False) + "\n"}
        if data.version == "1.1":
            values = qa_metrics.evaluate_v1(gold, predictions)
            return {**values, "score": values["f1"]}, files
        null_odds = {qid: answer.null_score for qid, answer in answers.items()}
        files["null_odds.json"] = json.dumps(null_odds, indent=2) + "\n"
        # The official 2.0 answer: "" where the null odds pass the threshold.
        thresholded = {qid: "" if null_odds[qid] > NULL_SCORE_THRESHOLD else text for qid, text in predictions.items()}
        files["predictions.json"] = json.dumps(thresholded, indent=2, ensure_ascii=False) + "\n"
        values = qa_metrics.evaluate_v2(gold, predictions, null_odds, threshold=NULL_SCORE_THRESHOLD)
        values = {name: values[name] for name in METRICS_V2 if name in values}
        return {**values, "score": values["f1"]}, files

    def describe_data(self, data: SquadData) -> list[str]:
        kind = self.config.task
        skipped = f", {data.skipped:,} training answers not found at their answer_start and skipped" \
            if data.skipped else ""
        eval_windows = sum(map(len, data.evaluation.windows))
        train = (f"{data.train_questions:,} training questions -> {data.train_windows:,} windows, "
                 if data.train is not None else "")
        return [f"SQuAD {data.version}: {train}{len(data.eval.examples):,} eval questions -> {eval_windows:,} "
                f"windows (doc_stride {data.doc_stride}, max_query_length {kind.max_query_length}){skipped}; "
                f"{kind.qa_head} head; scores in percent, the official evaluation's"]

    def data_summary(self, data: SquadData) -> dict:
        kind = self.config.task
        return {"question_answering": {
            "version": data.version, "head": kind.qa_head, "doc_stride": data.doc_stride,
            "max_query_length": kind.max_query_length, "max_answer_length": kind.max_answer_length,
            "train_questions": data.train_questions, "skipped_train_answers": data.skipped,
            "eval_windows": sum(map(len, data.evaluation.windows)),
            **({"null_score_threshold": NULL_SCORE_THRESHOLD} if data.version == "2.0" else {})}}


def _packed(windows, max_seq_length: int) -> dict:
    """token_ids, segment_ids, padding_mask [N, max_seq_length] of windows."""
    token_ids = np.zeros((len(windows), max_seq_length), np.int32)
    segment_ids = np.zeros_like(token_ids)
    padding_mask = np.zeros_like(token_ids)
    for row, window in enumerate(windows):
        length = len(window.token_ids)
        token_ids[row, :length] = window.token_ids
        segment_ids[row, :length] = window.segment_ids
        padding_mask[row, :length] = 1
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
