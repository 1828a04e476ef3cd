"""`ElectraQuestionAnswerer`: extractive question answering on the pre-trained discriminator.

Inputs are the windows of `squad.make_windows` as token ids; answers may start or end only in
the context or at [CLS] (position 0, "not in this window"): the answer mask is padding mask x
segment ids, plus [CLS], as in the official code.

Two heads:

- `head="electra"` (default), the official ELECTRA head, XLNet's QA module:
    start logits = dense(1)(h_i), masked;
    end logits   = dense(1)(dense(512, GELU)([h_i ; h_start])), masked, conditioned on the start:
                   in training the gold start, at inference each of the `beam_size` best starts,
                   keeping the `beam_size` best ends of each (a 20 x 20 beam);
    answerability (SQuAD 2.0) = dense(1)(dense(512, GELU)([h_[CLS] ; sum_i p_start(i) h_i])),
                   sigmoid cross-entropy against "impossible", weighted `answerable_weight` (0.5);
    span loss    = mean of the start and end softmax cross-entropies.
  Every dense layer here is Glorot-initialised, as the official `tf.layers.dense` calls are.
- `head="plain"`, transformers' `ElectraForQuestionAnswering`: one dense(2) (`qa_outputs`),
  start and end logits independent, the same masked span loss; its beam is the top starts and
  the top ends, which `answers.best_answers` pairs.

`fit` takes batches `(inputs, labels)`: inputs `token_ids`, `segment_ids`, `padding_mask` (and,
for the electra head, the gold `start_positions`, which conditions the end in training); labels
`start_positions`, `end_positions`, `is_impossible`. `predict` returns the beam per window.

Example:
>>> import numpy as np
>>> from electra_tf.models.config import ModelConfig
>>> from electra_tf.models.encoders import build_discriminator
>>> config = ModelConfig(vocab_size=16, hidden_size=128, num_layers=1, num_heads=2, intermediate_size=512)
>>> model = ElectraQuestionAnswerer(build_discriminator(config), beam_size=3)
>>> inputs = {"token_ids": np.array([[2, 7, 3, 9, 10, 11, 3]]), "segment_ids": np.array([[0, 0, 0, 1, 1, 1, 1]]),
...           "padding_mask": np.ones((1, 7), "int32")}
>>> outputs = model.predict(inputs, verbose=0)
>>> outputs["start_top_index"].shape, outputs["end_top_index"].shape
((1, 3), (1, 3, 3))
>>> model.compile(optimizer="adam")
>>> labels = {"start_positions": np.array([4]), "end_positions": np.array([5]), "is_impossible": np.array([0])}
>>> history = model.fit({**inputs, "start_positions": labels["start_positions"]}, labels, verbose=0)
"""

from __future__ import annotations

import keras
import tensorflow as tf

from electra_tf.finetuning.question_answering.serving import question_answerer_endpoints
from electra_tf.finetuning.question_answering.squad import default_doc_stride
from electra_tf.models.encoders import Discriminator, deserialize_as
from electra_tf.models.heads import OFFICIAL_DEFAULT_DENSE_INIT
from electra_tf.runtime.compiled_step import CompiledGradients
from electra_tf.utils.errors import RunError

HEADS = ("electra", "plain")
QA_HIDDEN = 512  # the official head's width, whatever the model's
MASKED = -1000.0  # what the official code adds to a position outside the answer mask
BEAM_SIZE = 20


def answer_mask(segment_ids, padding_mask):
    """1.0 where an answer may start or end: the context, its closing [SEP], and [CLS]."""
    mask = tf.cast(padding_mask, tf.float32) * tf.cast(segment_ids, tf.float32)
    return tf.maximum(mask, tf.one_hot(0, tf.shape(mask)[1], dtype=tf.float32)[tf.newaxis])


def span_cross_entropy(logits, positions):
    """-log softmax(logits)[position], per window."""
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=positions, logits=logits)


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraQuestionAnswerer(CompiledGradients, keras.Model):
    # Why it has no `litert_endpoint`, for the LiteRT format's refusal.
    litert_refusal = ("its windows over a long context and the answer's text do not fit one fixed-shape graph "
                      "without Select TF ops")

    def __init__(self, backbone, head: str = "electra", answerable: bool = True, beam_size: int = BEAM_SIZE,
                 answerable_weight: float = 0.5, max_query_length: int = 64, doc_stride: int | None = None,
                 max_answer_length: int = 30, **kwargs):
        super().__init__(**kwargs)
        if head not in HEADS:
            raise ValueError(f"head must be one of {HEADS}, got {head!r}.")
        self.backbone = deserialize_as(backbone, Discriminator, type(self).__name__, "backbone")
        self.backbone.head.trainable = False  # the replaced-token head: pre-training only
        self.head_type, self.answerable, self.beam_size = head, answerable, beam_size
        self.answerable_weight = answerable_weight
        # How questions become windows and answers, kept with the model so its export does the same.
        self.max_query_length, self.max_answer_length = max_query_length, max_answer_length
        self.doc_stride = doc_stride
        hidden = self.backbone.hidden_size
        dense = dict(kernel_initializer=OFFICIAL_DEFAULT_DENSE_INIT)
        with keras.name_scope(self.name):
            if head == "plain":
                self.qa_outputs = keras.layers.Dense(2, name="qa_outputs", **dense)
                self.qa_outputs.build((None, None, hidden))
            else:
                self.start_dense = keras.layers.Dense(1, name="start_logits", **dense)
                self.end_hidden = keras.layers.Dense(QA_HIDDEN, activation="gelu", name="qa_hidden", **dense)
                self.end_dense = keras.layers.Dense(1, name="qa_logits", **dense)
                self.start_dense.build((None, None, hidden))
                self.end_hidden.build((None, None, 2 * hidden))
                self.end_dense.build((None, None, QA_HIDDEN))
            if answerable:
                self.answerable_hidden = keras.layers.Dense(QA_HIDDEN, activation="gelu", name="answerable_hidden",
                                                            **dense)
                self.answerable_dense = keras.layers.Dense(1, name="answerable_logit", **dense)
                self.answerable_hidden.build((None, 2 * hidden))
                self.answerable_dense.build((None, QA_HIDDEN))
        self.built = True

    def call(self, inputs, training=None):
        hidden = tf.cast(self.backbone.encode(inputs, training=training), tf.float32)
        mask = answer_mask(inputs["segment_ids"], inputs["padding_mask"])
        outside = MASKED * (1.0 - mask)
        if self.head_type == "plain":
            start_logits, end_logits = tf.unstack(tf.cast(self.qa_outputs(hidden), tf.float32), axis=-1)
            start_logits, end_logits = start_logits + outside, end_logits + outside
            outputs = {"start_logits": start_logits, "end_logits": end_logits}
            if not training:
                beam = self._beam(start_logits)
                starts = tf.nn.top_k(start_logits, k=beam)
                ends = tf.nn.top_k(end_logits, k=beam)
                outputs.update(start_top_log_probs=starts.values, start_top_index=starts.indices,
                               end_top_log_probs=tf.tile(ends.values[:, tf.newaxis], [1, beam, 1]),
                               end_top_index=tf.tile(ends.indices[:, tf.newaxis], [1, beam, 1]))
        else:
            start_logits = tf.squeeze(tf.cast(self.start_dense(hidden), tf.float32), -1) + outside
            if training:
                start = tf.gather(hidden, tf.cast(inputs["start_positions"], tf.int32), batch_dims=1)  # [B, H]
                features = tf.concat([tf.broadcast_to(start[:, tf.newaxis], tf.shape(hidden)), hidden], -1)
                end_logits = tf.squeeze(tf.cast(self.end_dense(self.end_hidden(features)), tf.float32), -1) + outside
                outputs = {"start_logits": start_logits, "end_logits": end_logits}
            else:
                beam = self._beam(start_logits)
                starts = tf.nn.top_k(tf.nn.log_softmax(start_logits), k=beam)
                start = tf.gather(hidden, starts.indices, batch_dims=1)  # [B, beam, H]
                shape = tf.concat([tf.shape(start)[:2], tf.shape(hidden)[1:]], 0)  # [B, beam, L, H]
                features = tf.concat([tf.broadcast_to(start[:, :, tf.newaxis], shape),
                                      tf.broadcast_to(hidden[:, tf.newaxis], shape)], -1)
                end_logits = tf.squeeze(tf.cast(self.end_dense(self.end_hidden(features)), tf.float32), -1)
                ends = tf.nn.top_k(tf.nn.log_softmax(end_logits + outside[:, tf.newaxis]), k=beam)
                outputs = {"start_logits": start_logits, "start_top_log_probs": starts.values,
                           "start_top_index": starts.indices, "end_top_log_probs": ends.values,
                           "end_top_index": ends.indices}
        if self.answerable:
            weighted = tf.reduce_sum(tf.nn.softmax(start_logits)[..., tf.newaxis] * hidden, axis=1)
            features = tf.concat([hidden[:, 0], weighted], -1)
            outputs["answerable_logit"] = tf.squeeze(
                tf.cast(self.answerable_dense(self.answerable_hidden(features)), tf.float32), -1)
        return outputs

    def _beam(self, logits):
        """The beam, or the whole sequence when it is shorter."""
        return tf.minimum(self.beam_size, tf.shape(logits)[1])

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        start_positions = tf.cast(y["start_positions"], tf.int32)
        end_positions = tf.cast(y["end_positions"], tf.int32)
        loss = (span_cross_entropy(y_pred["start_logits"], start_positions)
                + span_cross_entropy(y_pred["end_logits"], end_positions)) / 2.0
        if self.answerable:
            loss += self.answerable_weight * tf.nn.sigmoid_cross_entropy_with_logits(
                tf.cast(tf.reshape(y["is_impossible"], [-1]), tf.float32), y_pred["answerable_logit"])
        return tf.reduce_mean(loss)

    def serving_endpoints(self, tokenizer, max_seq_length: int) -> dict:
        """The export's signature: raw question and context in, the answer out
        (`finetuning/question_answering/serving.py`), windowed as the model was fine-tuned."""
        if max_seq_length - self.max_query_length - 3 < 1:
            raise RunError(f"the question answerer keeps questions of up to {self.max_query_length} pieces, which "
                           f"leaves no room for a context in its {max_seq_length}-piece windows; set its "
                           "max_query_length lower (fine-tuning: --max_query_length).")
        return question_answerer_endpoints(self, tokenizer, max_seq_length, self.export_doc_stride(max_seq_length),
                                           self.max_query_length, self.max_answer_length)

    def export_doc_stride(self, max_seq_length: int) -> int:
        return self.doc_stride or default_doc_stride(max_seq_length)

    def serving_task(self, max_seq_length: int) -> dict:
        """task.json of the export: the head and the windowing settings."""
        return {"question_answering": True, "head": self.head_type, "answerable": self.answerable,
                "doc_stride": self.export_doc_stride(max_seq_length), "max_query_length": self.max_query_length,
                "max_answer_length": self.max_answer_length}

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable,
                "backbone": keras.saving.serialize_keras_object(self.backbone), "head": self.head_type,
                "answerable": self.answerable, "beam_size": self.beam_size,
                "answerable_weight": self.answerable_weight, "max_query_length": self.max_query_length,
                "doc_stride": self.doc_stride, "max_answer_length": self.max_answer_length}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
