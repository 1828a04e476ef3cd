import numpy as np

from electra_tf.data.packing import ExamplePacker

CLS, SEP = 2, 3


def random_documents(count, seed=0):
    rng = np.random.default_rng(seed)
    return [[list(rng.integers(10, 100, size=rng.integers(3, 40))) for _ in range(rng.integers(1, 30))]
            for _ in range(count)]


def test_examples_are_well_formed():
    packer = ExamplePacker(64, CLS, SEP)
    for index, document in enumerate(random_documents(200)):
        for ids, segments in packer.pack_document(document, f"0/{index}"):
            assert len(ids) == len(segments) <= 64
            assert ids[0] == CLS and ids[-1] == SEP
            assert segments[0] == 0 and segments == sorted(segments)
            first_sep = ids.index(SEP)
            assert all(s == 0 for s in segments[: first_sep + 1])
            if 1 in segments:
                assert ids.count(SEP) == 2 and all(s == 1 for s in segments[first_sep + 1:])


def test_examples_never_cross_documents():
    packer = ExamplePacker(64, CLS, SEP)
    first = [[11] * 5, [12] * 5]
    second = [[21] * 5]
    examples = list(packer.pack_document(first, "a")) + list(packer.pack_document(second, "b"))
    assert len(examples) == 2  # the boundary flushed a short example
    assert 21 not in examples[0][0] and 11 not in examples[1][0]


def test_single_segment_and_short_target_rates():
    packer = ExamplePacker(128, CLS, SEP)
    single = total = short = 0
    for index in range(3000):
        # Long documents of short sentences: every example but the last is "full".
        document = [[10 + (i % 50)] * 8 for i in range(64)]
        examples = list(packer.pack_document(document, f"7/{index}"))[:-1]
        for ids, segments in examples:
            total += 1
            single += 1 not in segments
            short += len(ids) < 100
    assert total > 5000
    assert abs(single / total - 0.10) < 0.02
    assert 0.02 < short / total < 0.07  # 5% draw a target in [5, 128]; some land near 128


def test_deterministic_per_document_seed():
    packer = ExamplePacker(32, CLS, SEP)
    document = random_documents(1, seed=3)[0]
    assert list(packer.pack_document(document, "1/x")) == list(packer.pack_document(document, "1/x"))


def test_a_sentence_longer_than_the_example_is_truncated():
    packer = ExamplePacker(16, CLS, SEP)
    [(ids, segments)] = list(packer.pack_document([[9] * 100], "0/long"))
    assert len(ids) == 16 and ids[0] == CLS and ids[-1] == SEP
