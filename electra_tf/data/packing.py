"""Packing tokenized sentences into pre-training examples (official `ExampleBuilder` rules).

- Sentences of one document are added until their length reaches the target length; a
  document boundary flushes the current (shorter) example. Examples never span documents.
- 10% of examples have a single segment; otherwise segment A aims at (target - 3) // 2 tokens
  and segment B takes the rest. A sentence goes to A if A is empty, if it fits, or (50%) when
  it would overflow A while B is still empty.
- 5% of examples get a random target length in [5, max_length] instead of max_length.
- Output `[CLS] A [SEP] B [SEP]` with segment ids 0 for `[CLS] A [SEP]`, 1 for `B [SEP]`,
  truncated to max_length; no padding (the input pipeline pads).

Deliberate deviation: the official builder draws the next example's target length after each
example, carrying it across documents; here every example draws its own target from a
random stream seeded by (seed, document), so an example depends only on its document and the
seed — which makes parallel building deterministic whatever the number of workers.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Iterable

from electra_tf.data.corpus import to_sentences
from electra_tf.data.shards import serialize_example

SINGLE_SEGMENT_RATE = 0.1
SHORT_TARGET_RATE = 0.05
MIN_SHORT_TARGET = 5


def is_held_out(seed: int, source: str, index: int, fraction: float) -> bool:
    """Whether document `index` of file `source` belongs to the held-out split: a hash of
    (seed, file name, document index), so the split is the same whichever builder, worker or
    machine packs the document, and a document is held out whole.

    >>> sum(is_held_out(0, "wiki.txt", i, 0.1) for i in range(10_000))
    992
    """
    if fraction <= 0.0:
        return False
    digest = hashlib.sha256(f"held-out/{seed}/{Path(source).name}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0 ** 64 < fraction


def pack_sentences(packer: "ExamplePacker", tokenizer, sentences: list[str], seed: int, source: str,
                   index: int):
    """The examples of one document of sentences, tokenized in one batch.

    The random stream is keyed by (seed, file name, document index): that key is what makes
    an example depend only on its document, however the work is split across processes.
    """
    token_ids = tokenizer.tokenize(sentences).to_list()
    return packer.pack_document(token_ids, f"{seed}/{Path(source).name}/{index}")


class ExamplePacker:
    """Turns the tokenized sentences of a document into packed examples.

    Example:
    >>> packer = ExamplePacker(max_length=8, cls_id=2, sep_id=3)
    >>> examples = packer.pack_document([[10, 11], [12, 13, 14], [15]], seed="0/doc")
    >>> [(ids, segments) for ids, segments in examples]  # [15] is cut: 8 tokens at most
    [([2, 10, 11, 3, 12, 13, 14, 3], [0, 0, 0, 0, 1, 1, 1, 1])]
    """

    def __init__(self, max_length: int, cls_id: int, sep_id: int):
        if max_length < MIN_SHORT_TARGET:
            raise ValueError(f"max_length must be at least {MIN_SHORT_TARGET}, got {max_length}.")
        self.max_length = max_length
        self.cls_id = cls_id
        self.sep_id = sep_id

    def pack_document(self, sentences: Iterable[list[int]], seed: str):
        """Yields (token_ids, segment_ids) examples of one document."""
        rng = random.Random(seed)
        target = self._draw_target(rng)
        current: list[list[int]] = []
        length = 0
        for sentence in sentences:
            if not sentence:
                continue
            current.append(sentence)
            length += len(sentence)
            if length >= target:
                yield self._make_example(current, target, rng)
                current, length = [], 0
                target = self._draw_target(rng)
        if current:  # the document boundary flushes what is left
            yield self._make_example(current, target, rng)

    def _draw_target(self, rng: random.Random) -> int:
        if rng.random() < SHORT_TARGET_RATE:
            return rng.randint(MIN_SHORT_TARGET, self.max_length)
        return self.max_length

    def _make_example(self, sentences: list[list[int]], target: int, rng: random.Random):
        if rng.random() < SINGLE_SEGMENT_RATE:
            first_target = 100_000
        else:
            first_target = (target - 3) // 2
        first: list[int] = []
        second: list[int] = []
        for sentence in sentences:
            if (not first or len(first) + len(sentence) < first_target
                    or (not second and len(first) < first_target and rng.random() < 0.5)):
                first += sentence
            else:
                second += sentence
        # Room for [CLS] and one or two [SEP].
        first = first[: self.max_length - 2]
        second = second[: max(0, self.max_length - len(first) - 3)]
        token_ids = [self.cls_id, *first, self.sep_id]
        segment_ids = [0] * len(token_ids)
        if second:
            token_ids += [*second, self.sep_id]
            segment_ids += [1] * (len(second) + 1)
        return token_ids, segment_ids


class DocumentPacker:
    """One document -> its sentences and its packed examples, as every builder's worker makes
    them (this machine's processes and Beam's alike): markup removal and sentence splitting
    (`corpus.to_sentences`), tokenization and packing (`packing.pack_sentences`), each example
    serialized (`shards.serialize_example`). Made once per worker: it loads the tokenizer."""

    def __init__(self, vocab_path, max_seq_length: int, seed: int, held_out: float = 0.0):
        from electra_tf.data.tokenization import ElectraTokenizer

        self.tokenizer = ElectraTokenizer(vocab_path)
        self.packer = ExamplePacker(max_seq_length, self.tokenizer.cls_id, self.tokenizer.sep_id)
        self.seed = seed
        self.held_out = held_out

    def holds_out(self, document) -> bool:
        """Whether `document` goes to the held-out split (`is_held_out`)."""
        return is_held_out(self.seed, document.source, document.index, self.held_out)

    def pack(self, document, skips) -> tuple[list[str], list[tuple[bytes, int]]]:
        """(sentences, [(serialized example, its token count)]); no sentences, no examples."""
        sentences = to_sentences(document, skips)
        if not sentences:
            return sentences, []
        return sentences, [(serialize_example(ids, segments), len(ids)) for ids, segments in pack_sentences(
            self.packer, self.tokenizer, sentences, self.seed, document.source, document.index)]
