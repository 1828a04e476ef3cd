"""Prompts for the replaced-token head: a template with one label slot, words per class, and the
filled sequences the discriminator reads (Xia et al., EMNLP 2022, "Prompting ELECTRA").

    template      "{text} It was {label}."             pairs: "{text_a} ? {label}, {text_b}"
    label words   "positive=great|good; negative=terrible"   (classes by ";", alternatives by "|")

For every text and every (class, word) variant the template is filled into one sequence,
`[CLS] <the template, the text and the word in it> [SEP]`, segment 0 throughout (the paper's
templates are one sentence, a pair's texts included); `label_mask` marks the word's pieces. The
literal parts of the template and each word are tokenized on their own with the model's tokenizer,
so a word is always whole pieces (as the paper's label words are tokens of their own). A text is
cut to the pieces the template and the longest word leave (a pair by the official rule,
`preprocessing.pair_lengths`), so the word is never cut off and every variant of a text holds the
same text. The filling is dense graph ops (`fill_templates`): the same in `fit`, the SavedModel
and the LiteRT file.

>>> Template.parse("{text} It was {label}.").parts
(('slot', 'text'), ('literal', ' It was '), ('slot', 'label'), ('literal', '.'))
>>> words = LabelWords.parse("positive=great|very good; negative=terrible")
>>> words.classes, words.words
(('positive', 'negative'), (('great', 'very good'), ('terrible',)))
"""

from __future__ import annotations

import dataclasses
import string

import keras
import tensorflow as tf

from electra_tf.models.preprocessing import ElectraTextPreprocessor, pair_lengths, text_pieces, texts_of
from electra_tf.utils.errors import ElectraError

LABEL, TEXT, TEXT_B = "label", "text", "text_b"
FIELDS = {"label": LABEL, "text": TEXT, "text_a": TEXT, "text_b": TEXT_B}
CLASS_SEPARATOR, ALTERNATIVE_SEPARATOR = ";", "|"


class PromptError(ElectraError):
    """A template or label words that cannot make a prompt; the message says which and what to do."""


@dataclasses.dataclass(frozen=True)
class Template:
    """A template's parts in order: ("literal", text) and ("slot", "text" | "text_b" | "label")."""

    parts: tuple

    @classmethod
    def parse(cls, template: str) -> "Template":
        """`{text}` (or `{text_a}`), `{text_b}` for pairs and `{label}`, each once; `{{` and `}}`
        are braces of the text."""
        if not template or not template.strip():
            raise PromptError("--template is empty: give one such as \"{text} It was {label}.\"")
        parts = []
        try:
            parsed = list(string.Formatter().parse(template))
        except ValueError as error:
            raise PromptError(f"--template {template!r}: {error} (write {{{{ and }}}} for braces of the text).") \
                from None
        for literal, field, spec, conversion in parsed:
            if literal and parts and parts[-1][0] == "literal":  # "}}" ends a literal of its own
                parts[-1] = ("literal", parts[-1][1] + literal)
            elif literal:
                parts.append(("literal", literal))
            if field is None:
                continue
            if field not in FIELDS or spec or conversion:
                raise PromptError(f"--template {template!r}: unknown slot {{{field}}}; the slots are {{text}} "
                                  "(or {text_a}), {text_b} for sentence pairs, and {label}.")
            parts.append(("slot", FIELDS[field]))
        slots = [name for kind, name in parts if kind == "slot"]
        for name, shown in ((LABEL, "{label}"), (TEXT, "{text}")):
            if slots.count(name) != 1:
                raise PromptError(f"--template {template!r} holds {shown} {slots.count(name)} times: it needs it "
                                  "exactly once.")
        if slots.count(TEXT_B) > 1:
            raise PromptError(f"--template {template!r} holds {{text_b}} more than once.")
        return cls(tuple(parts))

    @property
    def pair(self) -> bool:
        return ("slot", TEXT_B) in self.parts


@dataclasses.dataclass(frozen=True)
class LabelWords:
    """Class names in order and each class's words (alternatives; a word may be a phrase)."""

    classes: tuple
    words: tuple

    @classmethod
    def parse(cls, spec: str) -> "LabelWords":
        """`class=word|word; class=word` (the `--label_words` flag gives one class an argument)."""
        items = [item.strip() for item in (spec or "").split(CLASS_SEPARATOR) if item.strip()]
        if not items:
            raise PromptError("--label_words is empty: give a word per class, e.g. "
                              "--label_words positive=great negative=terrible")
        classes, words = [], []
        for item in items:
            name, equals, alternatives = item.partition("=")
            name = name.strip()
            if not equals or not name:
                raise PromptError(f"--label_words: {item!r} is not CLASS=WORD (e.g. positive=great).")
            if name in classes:
                raise PromptError(f"--label_words names class {name!r} twice; give its words once, joined by "
                                  f"{ALTERNATIVE_SEPARATOR!r}.")
            phrases = tuple(" ".join(word.split()) for word in alternatives.split(ALTERNATIVE_SEPARATOR))
            if not any(phrases) or not all(phrases):
                raise PromptError(f"--label_words: class {name!r} has an empty word ({item!r}); give each class at "
                                  "least one word.")
            if any("=" in phrase for phrase in phrases):
                raise PromptError(f"--label_words: {item!r} holds another '='; give each class as an argument of "
                                  "its own (positive=great negative=terrible) or separate them with ';'.")
            classes.append(name)
            words.append(phrases)
        if len(classes) < 2:
            raise PromptError(f"--label_words names {len(classes)} class: give words for two classes or more.")
        seen = {}
        for name, phrases in zip(classes, words):
            for phrase in phrases:
                key = phrase.casefold()
                if key in seen and seen[key] != name:
                    raise PromptError(f"--label_words: classes {seen[key]!r} and {name!r} share the word {phrase!r}; "
                                      "a word can point at one class only.")
                seen[key] = name
        return cls(tuple(classes), tuple(words))

    def spec(self) -> str:
        return f"{CLASS_SEPARATOR} ".join(f"{name}={ALTERNATIVE_SEPARATOR.join(phrases)}"
                                          for name, phrases in zip(self.classes, self.words))


@dataclasses.dataclass(frozen=True)
class PromptLayout:
    """A template and label words as token ids, for one tokenizer and sequence length: the
    template's parts (("ids", ids) or a text slot), each variant's word ids, the class of each
    variant, and the pieces left for the text(s)."""

    parts: tuple
    variants: tuple
    variant_classes: tuple
    num_classes: int
    text_budget: int
    pair: bool

    @classmethod
    def build(cls, template: Template, words: LabelWords, tokenizer, max_seq_length: int) -> "PromptLayout":
        parts = tuple(("ids", _ids(tokenizer, value)) if kind == "literal" else ("slot", value)
                      for kind, value in template.parts)
        variants, variant_classes, owner = [], [], {}
        for index, (name, phrases) in enumerate(zip(words.classes, words.words)):
            for phrase in phrases:
                ids = _ids(tokenizer, phrase)
                if not ids:
                    raise PromptError(f"--label_words: the word {phrase!r} of class {name!r} gives no word piece.")
                if tokenizer.unk_id in ids:
                    pieces = " ".join(tokenizer.id_to_token(i) for i in ids)
                    raise PromptError(f"--label_words: the vocabulary has no pieces for the word {phrase!r} of class "
                                      f"{name!r} (it reads as {pieces}); choose another word.")
                if ids in owner and owner[ids] != name:
                    raise PromptError(f"--label_words: the words of classes {owner[ids]!r} and {name!r} give the same "
                                      f"pieces ({phrase!r}); choose words that differ.")
                owner[ids] = name
                variants.append(ids)
                variant_classes.append(index)
        fixed = 2 + sum(len(value) for kind, value in parts if kind == "ids")
        budget = max_seq_length - fixed - max(len(ids) for ids in variants)
        if budget < (2 if template.pair else 1):
            raise PromptError(f"the template and the longest label word take {max_seq_length - budget} of the "
                              f"{max_seq_length} positions (max_seq_length), leaving no room for the text: shorten "
                              "the template or raise --max_seq_length.")
        return cls(parts, tuple(variants), tuple(variant_classes), len(words.classes), budget, template.pair)

    @property
    def averaging(self) -> list:
        """[variants, classes]: 1/(the class's variants) where a variant is the class's word, so a
        class's score is the mean of its words' scores."""
        counts = [self.variant_classes.count(c) for c in range(self.num_classes)]
        return [[1.0 / counts[c] if owner == c else 0.0 for c in range(self.num_classes)]
                for owner in self.variant_classes]


def _ids(tokenizer, text: str) -> tuple:
    return tuple(int(i) for i in tokenizer.tokenize(tf.constant([text])).to_list()[0])


def fill_templates(layout: PromptLayout, tokenizer, length: int, pieces, pieces_b=None) -> dict:
    """The text(s)' pieces (ragged int [batch, (pieces)]) in every variant of the template:
    token_ids, segment_ids, padding_mask and label_mask, int32 [batch, variants, length]."""
    lengths = tf.cast(pieces.row_lengths(), tf.int32)
    if layout.pair:
        kept, kept_b = pair_lengths(lengths, tf.cast(pieces_b.row_lengths(), tf.int32), layout.text_budget)
    else:
        kept, kept_b = tf.minimum(lengths, layout.text_budget), None
    texts = {TEXT: (_dense(pieces, layout.text_budget, tokenizer.pad_id), kept)}
    if layout.pair:
        texts[TEXT_B] = (_dense(pieces_b, layout.text_budget, tokenizer.pad_id), kept_b)
    batch = tf.shape(kept)[0]
    filled = [_fill(layout, tokenizer, length, texts, variant, batch) for variant in layout.variants]
    return {name: tf.stack([one[name] for one in filled], axis=1) for name in filled[0]}


def _dense(pieces, width: int, pad_id: int):
    return tf.cast(pieces.to_tensor(default_value=pad_id, shape=[None, width]), tf.int32)


def _fill(layout: PromptLayout, tokenizer, length: int, texts: dict, variant: tuple, batch) -> dict:
    """One variant: each part's values placed after the parts before it, by dense gathers (LiteRT
    has kernels for them)."""
    sources = [(tf.constant([tokenizer.cls_id]), None, False)]
    for kind, value in layout.parts:
        if kind == "ids":
            sources.append((tf.constant(value, tf.int32), None, False))
        elif value == LABEL:
            sources.append((tf.constant(variant, tf.int32), None, True))
        else:
            sources.append((*texts[value], False))
    sources.append((tf.constant([tokenizer.sep_id]), None, False))
    positions = tf.range(length)[tf.newaxis, :]  # [1, length]
    token_ids = tf.fill([batch, length], tokenizer.pad_id)
    label_mask = tf.zeros([batch, length], tf.int32)
    start = tf.zeros([batch, 1], tf.int32)
    for values, kept, is_label in sources:
        width = values.shape[-1]
        if not width:
            continue
        count = tf.fill([batch, 1], width) if kept is None else kept[:, tf.newaxis]
        inside = (positions >= start) & (positions < start + count)
        index = tf.clip_by_value(positions - start, 0, width - 1)
        placed = tf.gather(values, index) if kept is None else tf.gather(values, index, batch_dims=1)
        token_ids = tf.where(inside, placed, token_ids)
        if is_label:
            label_mask = tf.where(inside, 1, label_mask)
        start += count
    padding_mask = tf.cast(positions < start, tf.int32)
    return {"token_ids": token_ids, "segment_ids": tf.zeros_like(token_ids), "padding_mask": padding_mask,
            "label_mask": label_mask}


@keras.saving.register_keras_serializable(package="electra_tf")
class PromptPreprocessor(ElectraTextPreprocessor):
    """Strings (or `(text, text_pair)`) -> the filled templates (`fill_templates`) and labels: the
    `preprocessor` of `ElectraPromptClassifier`.

    Example:
    >>> vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "it", "was", "good", "bad", "film", "."]
    >>> preprocessor = PromptPreprocessor(vocabulary, 10, template="{text} It was {label}.",
    ...                                   label_words="positive=good; negative=bad")
    >>> inputs = preprocessor(["film"])
    >>> inputs["token_ids"].numpy()[0].tolist()
    [[2, 9, 5, 6, 7, 10, 3, 0, 0, 0], [2, 9, 5, 6, 8, 10, 3, 0, 0, 0]]
    >>> inputs["label_mask"].numpy()[0, 0].tolist()
    [0, 0, 0, 0, 1, 0, 0, 0, 0, 0]
    """

    def __init__(self, vocabulary, max_seq_length: int = 128, tokenizer_settings: dict | None = None,
                 sentencepiece_model: str | None = None, template: str = "", label_words: str = "", **kwargs):
        super().__init__(vocabulary, max_seq_length, tokenizer_settings, sentencepiece_model, **kwargs)
        self.template, self.label_words = Template.parse(template), LabelWords.parse(label_words)
        self.layout = PromptLayout.build(self.template, self.label_words, self.tokenizer, max_seq_length)

    def fill(self, pieces, pieces_b=None) -> dict:
        return fill_templates(self.layout, self.tokenizer, self.max_seq_length, pieces, pieces_b)

    def call(self, x, y=None, sample_weight=None):
        text, text_pair = texts_of(x)
        if (text_pair is not None) != self.layout.pair:
            raise ValueError("the template takes a pair ({text_b}): give (text, text_pair)" if self.layout.pair
                             else "the template has no {text_b}: give single texts")
        pieces = text_pieces(self.tokenizer, text, self.max_seq_length)
        pieces_b = None if text_pair is None else text_pieces(self.tokenizer, text_pair, self.max_seq_length)
        return keras.utils.pack_x_y_sample_weight(self.fill(pieces, pieces_b), y, sample_weight)

    def get_config(self):
        template = "".join(value.replace("{", "{{").replace("}", "}}") if kind == "literal" else f"{{{value}}}"
                           for kind, value in self.template.parts)
        return {**super().get_config(), "template": template, "label_words": self.label_words.spec()}
