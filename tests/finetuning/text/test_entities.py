"""Entity chunks and entity-level scores, on hand-worked cases: conlleval's lenient rules,
IOBES, strict mode, the edge cases that broke other scorers."""

import pytest

from electra_tf.finetuning.text.entities import detect_scheme, entities, entity_scores, is_entity_tag_set


@pytest.mark.parametrize("tags, expected", [
    ([], []),                                                          # an empty sentence
    (["O", "O"], []),
    (["B-PER", "I-PER", "O", "B-LOC"], [("PER", 0, 2), ("LOC", 3, 4)]),
    (["O", "I-PER", "I-PER"], [("PER", 1, 3)]),                        # I- after O starts a chunk
    (["B-PER", "I-LOC", "I-LOC"], [("PER", 0, 1), ("LOC", 1, 3)]),     # a type change inside a chunk
    (["I-ORG", "B-ORG", "I-ORG"], [("ORG", 0, 1), ("ORG", 1, 3)]),     # IOB1: B- separates two of a kind
    (["B-PER", "E-PER", "S-LOC", "B-ORG", "I-ORG", "E-ORG"], [("PER", 0, 2), ("LOC", 2, 3), ("ORG", 3, 6)]),
    (["S-PER", "I-PER"], [("PER", 0, 1), ("PER", 1, 2)]),             # nothing continues an S-
    (["B-PER", "B-PER"], [("PER", 0, 1), ("PER", 1, 2)]),
    (["MISC", "MISC", "O"], [("MISC", 0, 2)]),                         # tags without a prefix are inside
])
def test_lenient_chunks(tags, expected):
    assert entities(tags) == expected


@pytest.mark.parametrize("scheme, tags, expected", [
    ("IOB2", ["O", "I-PER", "I-PER", "B-LOC", "I-LOC"], [("LOC", 3, 5)]),  # I- after O is no entity
    ("IOB2", ["B-PER", "I-LOC"], [("PER", 0, 1)]),
    ("IOBES", ["B-PER", "I-PER", "E-PER", "B-LOC", "O", "S-ORG"], [("PER", 0, 3), ("ORG", 5, 6)]),  # unclosed B-
    ("IOBES", ["B-PER", "E-LOC"], []),
    ("IOB1", ["I-PER", "B-PER", "O", "B-LOC"], [("PER", 0, 1), ("PER", 1, 2)]),  # B- only after its own type
])
def test_strict_chunks(scheme, tags, expected):
    assert entities(tags, strict=True, scheme=scheme) == expected


def test_scores_micro_and_per_type():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], [], ["B-ORG", "O", "B-PER"]]
    predicted = [["B-PER", "I-PER", "O", "B-ORG"], [], ["B-ORG", "O", "B-PER"]]
    scores = entity_scores(gold, predicted)
    assert scores["entity_precision"] == scores["entity_recall"] == scores["entity_f1"] == pytest.approx(0.75)
    assert scores["per_type"]["PER"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 2}
    assert scores["per_type"]["LOC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert scores["per_type"]["ORG"]["precision"] == 0.5 and scores["per_type"]["ORG"]["recall"] == 1.0
    # A boundary off by one word is wrong twice: a missed and a spurious entity.
    off = entity_scores([["B-PER", "I-PER", "O"]], [["B-PER", "I-PER", "I-PER"]])
    assert off["entity_f1"] == 0.0
    # Lenient counts "O I-PER" as an entity, strict IOB2 does not.
    assert entity_scores([["O", "B-PER"]], [["O", "I-PER"]])["entity_f1"] == 1.0
    assert entity_scores([["O", "B-PER"]], [["O", "I-PER"]], strict=True)["entity_f1"] == 0.0
    assert entity_scores([[]], [[]]) == {"entity_precision": 0.0, "entity_recall": 0.0, "entity_f1": 0.0,
                                         "per_type": {}}
    with pytest.raises(ValueError, match="sentence 0: 2 gold tags but 1 predicted"):
        entity_scores([["O", "O"]], [["O"]])


def test_tag_sets_and_schemes():
    assert is_entity_tag_set(["O", "B-PER", "I-PER"]) and is_entity_tag_set(["O", "S-LOC", "E-LOC"])
    assert not is_entity_tag_set(["NN", "VB", "DT"]) and not is_entity_tag_set(["O"])
    assert detect_scheme(["O", "B-PER", "I-PER"]) == "IOB2"
    assert detect_scheme(["O", "I-PER", "B-PER"]) == "IOB2"
    assert detect_scheme(["O", "I-PER"]) == "IOB1" and detect_scheme(["O", "S-PER", "B-PER", "E-PER"]) == "IOBES"
