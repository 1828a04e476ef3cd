"""`ElectraPromptClassifier`: a classifier with no new parameters, the discriminator's
replaced-token head scoring a template filled with each class's word (Xia et al., EMNLP 2022,
"Prompting ELECTRA"; facebookresearch/ELECTRA-Fewshot-Learning, `ElectraV2ForPromptTuning`).

The scoring rule, here and nowhere else (`class_logits`):

    s(text, word)   = mean of the replaced-token logits over the word's pieces in the filled template
    s(text, class)  = mean of s(text, word) over the class's words
    p(class | text) = softmax over classes of -s(text, class)

so the predicted class is the one whose word the discriminator finds most original. The paper
scores one word per class at its first piece (`token_start`), and a multi-piece word by the mean
over its span (`ElectraForPromptSpanTraining`, "mean_prob"); the mean over a class's alternative
words is this package's. Few-shot prompt fine-tuning trains the whole discriminator, its head
included, with cross-entropy over those probabilities (the paper's few-shot objective).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from electra_tf.finetuning.text.models import TextInputModel
from electra_tf.finetuning.text.prompts import PromptPreprocessor, fill_templates
from electra_tf.models.preprocessing import text_pieces
from electra_tf.models.signatures import TEXT_INPUT, TEXT_PAIR_INPUTS, TEXT_SIGNATURE, batch_of_strings

MODEL_INPUTS = ("token_ids", "segment_ids", "padding_mask")


def class_logits(replaced_logits, label_mask, averaging):
    """The replaced-token logits of every filled template [batch, variants, length] and where the
    word sits (label_mask) -> minus each class's score [batch, classes]: the logits of
    p(class | text) (module docstring)."""
    mask = tf.cast(label_mask, tf.float32)
    per_word = tf.reduce_sum(tf.cast(replaced_logits, tf.float32) * mask, axis=-1) / tf.reduce_sum(mask, axis=-1)
    return -tf.matmul(per_word, tf.constant(averaging, tf.float32))


@keras.saving.register_keras_serializable(package="electra_tf")
class ElectraPromptClassifier(TextInputModel):
    """Texts -> class logits [B, classes] (minus each class's score), from the discriminator and its
    replaced-token head alone; `preprocessor` (a `PromptPreprocessor`) holds the template and the
    label words, and names the classes.

    Example:
    >>> from electra_tf.models.config import ModelConfig
    >>> from electra_tf.models.encoders import build_discriminator
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "it", "was", "good", "bad", "film", "."]
    >>> backbone = build_discriminator(ModelConfig(vocab_size=11, hidden_size=16, num_layers=1, num_heads=2,
    ...                                            intermediate_size=32))
    >>> model = ElectraPromptClassifier(backbone, PromptPreprocessor(
    ...     vocabulary, 12, template="{text} It was {label}.", label_words="positive=good; negative=bad"))
    >>> model.predict(["good film", "bad film"], verbose=0).shape
    (2, 2)
    >>> sorted(model.predict_labels(["good film"]))
    ['label', 'label_names', 'probabilities']
    """

    def __init__(self, backbone, preprocessor, label_names=None, **kwargs):
        super().__init__(backbone, preprocessor, label_names, **kwargs)
        if not isinstance(self.preprocessor, PromptPreprocessor):
            raise ValueError("an ElectraPromptClassifier's preprocessor is a PromptPreprocessor (its template and "
                             "label words).")
        self.label_names = list(self.preprocessor.label_words.classes)
        self.layout = self.preprocessor.layout
        self.num_classes = self.layout.num_classes
        self.text_pair = self.layout.pair
        self.built = True

    def call(self, inputs, training=None):
        shape = tf.shape(inputs["token_ids"])  # [batch, variants, length]
        flat = {name: tf.reshape(inputs[name], [-1, shape[-1]]) for name in MODEL_INPUTS}
        logits = tf.reshape(self.backbone(flat, training=training)["logits"], shape)
        return class_logits(logits, inputs["label_mask"], self.layout.averaging)

    def compile(self, optimizer="adamw", loss="auto", metrics="auto", **kwargs):
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True) if loss == "auto" else loss
        metrics = [keras.metrics.SparseCategoricalAccuracy("accuracy")] if metrics == "auto" else metrics
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def predict_labels(self, x, batch_size=None, verbose=0) -> dict:
        """What the export's `serving_default` returns: `label`, `probabilities` [N, classes] and
        `label_names`."""
        probabilities = tf.nn.softmax(self.predict(x, batch_size=batch_size, verbose=verbose), axis=-1).numpy()
        return {"label": np.array(self.label_names)[probabilities.argmax(-1)], "probabilities": probabilities,
                "label_names": self.label_names}

    # --- what it serves ----------------------------------------------------------------------------
    def _outputs(self, inputs) -> dict:
        probabilities = tf.nn.softmax(self(inputs, training=False), axis=-1)
        names = tf.constant(self.label_names)
        return {"probabilities": probabilities, "label": tf.gather(names, tf.argmax(probabilities, axis=-1)),
                "label_names": tf.tile(names[tf.newaxis], [tf.shape(probabilities)[0], 1])}

    def _filled(self, tokenize, text, text_pair=None) -> tuple[dict, tf.Tensor]:
        """(the filled templates, no_text: a text, or either of a pair, gave no word piece)."""
        pieces = tokenize(text)
        pieces_b = tokenize(text_pair) if text_pair is not None else None
        empty = pieces.row_lengths() == 0
        if pieces_b is not None:
            empty |= pieces_b.row_lengths() == 0
        tokenizer = self.preprocessor.tokenizer
        return fill_templates(self.layout, tokenizer, self.preprocessor.max_seq_length, pieces, pieces_b), empty

    def serving_endpoints(self, tokenizer, max_seq_length: int) -> dict:
        """`serving_default` only: text (and text_pair) -> label, probabilities, label_names,
        no_text. An ids signature would need the filled templates, which are the model's own."""
        length = self.preprocessor.max_seq_length

        def endpoint(text, text_pair=None):
            text = batch_of_strings(text, "text")
            text_pair = None if text_pair is None else batch_of_strings(text_pair, "text_pair")
            inputs, empty = self._filled(lambda t: text_pieces(self.preprocessor.tokenizer, t, length), text, text_pair)
            return {**self._outputs(inputs), "no_text": empty}

        if self.text_pair:
            return {TEXT_SIGNATURE: (lambda text, text_pair: endpoint(text, text_pair), TEXT_PAIR_INPUTS)}
        return {TEXT_SIGNATURE: (lambda text: endpoint(text), TEXT_INPUT)}

    def litert_endpoint(self, lite_tokenizer, max_seq_length: int):
        """Text (and text_pair) -> probabilities [b, classes], label_names [classes], no_text [b]."""
        def outputs(text, text_pair=None):
            inputs, empty = self._filled(lite_tokenizer.tokenize, text, text_pair)
            return {"probabilities": tf.nn.softmax(self(inputs, training=False), axis=-1),
                    "label_names": tf.constant(self.label_names), "no_text": empty}

        if self.text_pair:
            return (lambda text, text_pair: outputs(text, text_pair)), ["text", "text_pair"]
        return (lambda text: outputs(text)), ["text"]

    def serving_task(self, max_seq_length: int) -> dict:
        """task.json of the export: the classes, the template and the words."""
        config = self.preprocessor.get_config()
        return {"label_names": self.label_names, "text_pair": self.text_pair, "template": config["template"],
                "label_words": config["label_words"], "prompt": True}
