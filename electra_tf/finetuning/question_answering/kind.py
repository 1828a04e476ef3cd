"""Extractive question answering for the fine-tuning run (`--task squad`): SQuAD files in,
`ElectraQuestionAnswerer` trained on their windows, the official scores out, and
`predictions.json` (and `null_odds.json` for 2.0) beside the best epoch. See
`task_kind.TaskKind`; the windows are `squad.make_windows`, the answers `answers`, the
scores `metrics`."""

from __future__ import annotations

import json
import sys

from electra_tf.finetuning.task_kind import TaskKind

TASK_NAMES = ("squad", "squad1.1", "squad2.0")
OFFICIAL_EPOCHS = 2  # the official SQuAD recipe
# The official ELECTRA threshold on the null odds for SQuAD 2.0 (answer "" above it).
NULL_SCORE_THRESHOLD = -2.75
METRICS_V1 = ("exact_match", "f1")
METRICS_V2 = ("exact", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1", "best_exact", "best_f1")


def is_question_answering(task: str | None) -> bool:
    return task is not None and task.lower() in TASK_NAMES


class QuestionAnsweringKind(TaskKind):
    train_unit, eval_unit = "windows", "questions"  # an epoch goes through windows; scores are per question

    def __init__(self, options):
        from electra_tf.finetuning.question_answering.squad import read_squad

        self.options = options
        self.train_data = read_squad(options.train, training=True)
        self.eval_data = read_squad(options.eval, training=False)
        self.version = "2.0" if "2.0" in (self.train_data.version, self.eval_data.version) else "1.1"
        self.name = "squad" if self.version == "1.1" else "squad2"
        self.metric_names = METRICS_V1 if self.version == "1.1" else METRICS_V2
        self.eval_examples = len(self.eval_data.examples)

    def default_epochs(self) -> int:
        return OFFICIAL_EPOCHS

    def _windows(self, examples, tokenizer, max_seq_length, training, counts):
        from electra_tf.finetuning.question_answering.squad import make_windows, tokenize_contexts, tokenize_texts
        from electra_tf.utils.progress import Progress

        contexts = list(dict.fromkeys(example.context for example in examples))
        progress = Progress("windows", total=len(examples), unit="questions", stream=sys.stdout)
        tokenized = dict(zip(contexts, tokenize_contexts(contexts, tokenizer)))
        pieces_of = tokenize_texts([e.question for e in examples]
                                   + [text for e in examples for text, _ in e.answers[:1]], tokenizer)
        windows = []
        for number, example in enumerate(examples, 1):
            windows.append(make_windows(example, tokenizer, max_seq_length, self.options.doc_stride,
                                        self.options.max_query_length, training, counts,
                                        context=tokenized[example.context], pieces_of=pieces_of))
            if number % 500 == 0:
                progress.update(number)
        progress.finish(len(examples))
        return windows

    def datasets(self, tokenizer, max_seq_length, batch_size, seed):
        import numpy as np
        import tensorflow as tf

        from electra_tf.utils.errors import RunError
        from electra_tf.finetuning.question_answering.squad import default_doc_stride

        if max_seq_length - self.options.max_query_length - 3 < 1:
            raise RunError(f"--max_query_length {self.options.max_query_length} leaves no room for the context in "
                           f"windows of {max_seq_length} pieces; lower it below {max_seq_length - 3}.")
        self.doc_stride = self.options.doc_stride or default_doc_stride(max_seq_length)
        counts = {}
        per_question = self._windows(self.train_data.examples, tokenizer, max_seq_length, True, counts)
        train_windows = [w for ws in per_question for w in ws]
        # Answerability is the question's, as in the official code: a window of an answerable
        # question that lacks the answer is labelled [CLS] for the span, but not impossible.
        impossible = [example.is_impossible for example, ws in zip(self.train_data.examples, per_question) for _ in ws]
        self.skipped = counts.get("skipped", 0)
        self.train_questions = len(self.train_data.examples) - self.skipped
        self.train_examples = len(train_windows)
        self.eval_windows = self._windows(self.eval_data.examples, tokenizer, max_seq_length, False, {})
        inputs = _packed([w for ws in self.eval_windows for w in ws], max_seq_length)
        self.eval_inputs = tf.data.Dataset.from_tensor_slices(inputs).batch(batch_size)
        train = _packed(train_windows, max_seq_length)
        labels = {"start_positions": np.array([w.start_position for w in train_windows], np.int32),
                  "end_positions": np.array([w.end_position for w in train_windows], np.int32),
                  "is_impossible": np.array(impossible, np.float32)}
        train["start_positions"] = labels["start_positions"]  # conditions the official head's end in training
        dataset = tf.data.Dataset.from_tensor_slices((train, labels))
        return dataset.shuffle(len(train_windows), seed=seed, reshuffle_each_iteration=True).batch(batch_size)

    def build_model(self, backbone, config, tokenizer, max_seq_length):
        from electra_tf.finetuning.question_answering.model import ElectraQuestionAnswerer

        return ElectraQuestionAnswerer(backbone, head=self.options.qa_head, answerable=self.version == "2.0",
                                       max_query_length=self.options.max_query_length, doc_stride=self.doc_stride,
                                       max_answer_length=self.options.max_answer_length)

    def answers(self, model):
        """{question id: QuestionAnswer} for the eval questions."""
        from electra_tf.finetuning.question_answering.answers import WindowBeam, best_answers
        from electra_tf.utils.progress import Progress, batch_progress

        batches = self.eval_inputs.cardinality().numpy()
        outputs = model.predict(self.eval_inputs, verbose=0, callbacks=[batch_progress(
            "predicting", int(batches) if batches > 0 else None, "batches")])
        answers, row = {}, 0
        progress = Progress("answers", total=len(self.eval_data.examples), unit="questions", stream=sys.stdout)
        for number, (example, windows) in enumerate(zip(self.eval_data.examples, self.eval_windows), 1):
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
                                               max_answer_length=self.options.max_answer_length)
        progress.finish(len(self.eval_data.examples))
        return answers

    def evaluate(self, model):
        from electra_tf.finetuning.question_answering import metrics as qa_metrics

        answers = self.answers(model)
        gold = {e.id: [text for text, _ in e.answers] for e in self.eval_data.examples}
        predictions = {qid: answer.text for qid, answer in answers.items()}
        files = {"predictions.json": json.dumps(predictions, indent=2, ensure_ascii=False) + "\n"}
        if self.version == "1.1":
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

    def describe(self):
        skipped = f", {self.skipped:,} training answers not found at their answer_start and skipped" \
            if self.skipped else ""
        return (f"SQuAD {self.version}: {self.train_questions:,} training questions -> {self.train_examples:,} "
                f"windows, {self.eval_examples:,} eval questions -> {sum(map(len, self.eval_windows)):,} windows "
                f"(doc_stride {self.doc_stride}, max_query_length {self.options.max_query_length}){skipped}; "
                f"{self.options.qa_head} head; scores in percent, the official evaluation's")

    def summary(self):
        return {"question_answering": {
            "version": self.version, "head": self.options.qa_head, "doc_stride": self.doc_stride,
            "max_query_length": self.options.max_query_length, "max_answer_length": self.options.max_answer_length,
            "train_questions": self.train_questions, "skipped_train_answers": self.skipped,
            "eval_windows": sum(map(len, self.eval_windows)),
            **({"null_score_threshold": NULL_SCORE_THRESHOLD} if self.version == "2.0" else {})}}


def _packed(windows, max_seq_length: int) -> dict:
    """token_ids, segment_ids, padding_mask [N, max_seq_length] of windows."""
    import numpy as np

    token_ids = np.zeros((len(windows), max_seq_length), np.int32)
    segment_ids = np.zeros_like(token_ids)
    padding_mask = np.zeros_like(token_ids)
    for row, window in enumerate(windows):
        length = len(window.token_ids)
        token_ids[row, :length] = window.token_ids
        segment_ids[row, :length] = window.segment_ids
        padding_mask[row, :length] = 1
    return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
