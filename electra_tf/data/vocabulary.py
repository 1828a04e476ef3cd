"""Learning a vocabulary from a corpus: `build_vocabulary`.

WordPiece (uncased or cased; `tokenization.learn_vocabulary`, keras-hub's trainer) or
SentencePiece (unigram or BPE; `sentence_pieces.learn_sentencepiece`, the sentencepiece
library). Inputs are read like the shard builder's (text files, MediaWiki dumps, record files,
globs, folders). The vocabulary starts with [PAD] [UNK] [CLS] [SEP] [MASK].

A corpus too large for memory is learned from a uniform sample of its sentences: reservoir
sampling (Vitter's algorithm R) over every sentence read, seeded, so the sample depends only on
the inputs, its size and the seed. Below the sample size every sentence is used.
"""

from __future__ import annotations

import dataclasses
import random
import sys
import time
from pathlib import Path

from electra_tf.data.corpus import InputError, Skips, expand_inputs, iter_raw_documents, to_sentences
from electra_tf.data.sentence_pieces import learn_sentencepiece
from electra_tf.data.vocabulary_files import SENTENCEPIECE, TokenizerSettings, model_pieces, write_vocabulary
from electra_tf.utils.progress import Progress, heartbeat

# Right for a small corpus such as the bundled sample (BERT's is 30522).
DEFAULT_VOCAB_SIZE = 8192
# The smallest vocabulary that is asked for or learned: special tokens and a hundred or so pieces.
MIN_VOCAB_SIZE = 100
# tensorflow-text's WordPiece learner (under keras-hub's trainer) drops rarer pieces: its
# `lower_thresh` default, which keras-hub does not expose.
MIN_PIECE_COUNT = 10
# Sentences the vocabulary is learned from, at most: sized for one machine (a few GB of text in
# memory, and the learner's time); larger corpora are sampled uniformly.
DEFAULT_VOCAB_SAMPLE_SENTENCES = 5_000_000
# build_vocab / build_data --vocab_model: the kind of vocabulary, and for SentencePiece its algorithm.
VOCAB_MODELS = {"wordpiece": None, "sentencepiece": "unigram", "sentencepiece-bpe": "bpe"}


@dataclasses.dataclass(frozen=True)
class VocabularySpec:
    """A vocabulary to learn: its size and kind (`settings`, a `TokenizerSettings`: uncased
    WordPiece when None; for SentencePiece, `sentencepiece_type` unigram or bpe), and the text
    it is learned from: at most `max_documents` documents, a uniform sample of at most
    `sample_sentences` sentences (seeded by `seed`), records' text in `text_field`."""

    size: int = DEFAULT_VOCAB_SIZE
    settings: object = None
    sentencepiece_type: str = "unigram"
    sample_sentences: int | None = DEFAULT_VOCAB_SAMPLE_SENTENCES
    max_documents: int | None = None
    seed: int = 0
    text_field: str = "text"

    @classmethod
    def of(cls, vocab_model: str = "wordpiece", cased: bool = False, **values) -> "VocabularySpec":
        """The spec of a --vocab_model and --cased (the commands' flags)."""
        settings, sentencepiece_type = vocabulary_kind(vocab_model, cased)
        return cls(settings=settings, sentencepiece_type=sentencepiece_type or "unigram", **values)

    @property
    def tokenizer_settings(self):
        return self.settings or TokenizerSettings()


def vocabulary_kind(vocab_model: str, cased: bool):
    """(TokenizerSettings, SentencePiece model type or None) for a --vocab_model and --cased."""
    if vocab_model not in VOCAB_MODELS:
        raise ValueError(f"vocab_model {vocab_model!r}; expected one of {', '.join(VOCAB_MODELS)}.")
    sentencepiece_type = VOCAB_MODELS[vocab_model]
    if sentencepiece_type:
        return TokenizerSettings.sentencepiece(lowercase=not cased), sentencepiece_type
    return (TokenizerSettings.cased() if cased else TokenizerSettings()), None


def collect_sentences(inputs: list[str], skips: Skips, max_documents: int | None = None,
                      progress_label: str = "reading text", sample_sentences: int | None = None,
                      seed: int = 0, sample: dict | None = None, text_field: str = "text") -> list[str]:
    """The inputs' sentences, or a uniform sample of `sample_sentences` of them (seeded); the
    sample's size, the number of sentences read and the seed go into `sample` when given.
    `text_field`: the field of record files (JSON Lines, Parquet) that holds the text."""
    files = expand_inputs(inputs, skips)
    if not files:
        raise InputError(f"no input files found in {inputs} ({skips.describe()}).")
    progress = Progress(progress_label, total=max_documents, unit="documents")
    sentences: list[str] = []
    documents = seen = 0
    chooser = random.Random(seed)
    for path in files:
        for document in iter_raw_documents(path, skips, text_field):
            for sentence in to_sentences(document, skips):
                seen += 1
                if sample_sentences is None or len(sentences) < sample_sentences:
                    sentences.append(sentence)
                else:  # algorithm R: each of the `seen` sentences is kept with probability k / seen
                    slot = chooser.randrange(seen)
                    if slot < sample_sentences:
                        sentences[slot] = sentence
            documents += 1
            progress.update(documents, f"{len(sentences):,} sentences")
            if max_documents and documents >= max_documents:
                break
        if max_documents and documents >= max_documents:
            break
    progress.finish(documents, f"{len(sentences):,} sentences")
    if sample is not None:
        sample.update(sentences=len(sentences), of=seen, seed=seed)
    if not sentences:
        raise InputError(f"no text found in {', '.join(map(str, files))} ({skips.describe()}).")
    return sentences


def build_vocabulary(inputs: list[str], output: Path, spec: VocabularySpec = VocabularySpec(),
                     final_path: Path | None = None, sample: dict | None = None) -> list[str]:
    """Learns a vocabulary as `spec` says from `inputs` and writes it to `output` (atomically),
    with its `TokenizerSettings` in a tokenizer_config.json beside it, and for a SentencePiece
    kind its spm.model. `final_path`: where the file will end up when `output` is a temporary
    folder's (the message names it); `sample` receives the sentences' count, of how many, and
    the seed."""
    import tensorflow as tf

    from electra_tf.data.tokenization import learn_vocabulary

    settings, vocab_size, seed = spec.tokenizer_settings, spec.size, spec.seed
    skips = Skips()
    sample = {} if sample is None else sample
    sentences = collect_sentences(inputs, skips, spec.max_documents, sample_sentences=spec.sample_sentences, seed=seed,
                                  sample=sample, text_field=spec.text_field)
    which = (f"a uniform sample of {len(sentences):,} of {sample['of']:,} sentences (seed {seed})"
             if sample["of"] > len(sentences) else f"{len(sentences):,} sentences")
    kind = (f"{settings.describe()} ({spec.sentencepiece_type})" if settings.kind == SENTENCEPIECE
            else f"{settings.describe()} WordPiece")
    print(f"Learning a {vocab_size}-entry {kind} vocabulary from {which} "
          f"(skipped or repaired input: {skips.describe()}) ...", file=sys.stderr)
    started = time.monotonic()
    with heartbeat("learning the vocabulary"):  # one call into the learner: no percentage to show
        model = None
        if settings.kind == SENTENCEPIECE:

            model = learn_sentencepiece(sentences, vocab_size, settings.lowercase, spec.sentencepiece_type)
            vocabulary = model_pieces(model)
        else:
            vocabulary = learn_vocabulary(tf.data.Dataset.from_tensor_slices(sentences).batch(1000), vocab_size,
                                          settings)
    write_vocabulary(output, vocabulary, settings, model)
    print(f"Wrote {len(vocabulary):,} tokens (asked for {vocab_size:,}) to {Path(final_path or output).resolve()} in "
          f"{time.monotonic() - started:.0f} s.", file=sys.stderr)
    if len(vocabulary) < vocab_size // 2 and settings.kind != SENTENCEPIECE:
        print(f"note: the vocabulary is far smaller than asked. The WordPiece trainer keeps only word pieces "
              f"seen at least {MIN_PIECE_COUNT} times, and {len(sentences):,} sentences hold few, so common "
              f"words will be split into pieces. Ask for --vocab_size {len(vocabulary):,} or less, or give "
              "it more text (build_vocab --with_sample adds the bundled Wikipedia sample beside yours).",
              file=sys.stderr)
    return vocabulary
