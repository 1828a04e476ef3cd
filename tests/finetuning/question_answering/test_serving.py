"""The question-answering export, loaded as TF Serving loads it: the same answers as the Python
post-processing (`answers.best_answers` on `squad.make_windows`), offsets that cut the
answer from the context, and defined behaviour on empty, huge and invalid input."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from electra_tf.models.backbone import BackboneConfig
from electra_tf.pretraining.config import PretrainingConfig
from electra_tf.data.tokenization import ElectraTokenizer
from electra_tf.finetuning.question_answering.answers import WindowBeam, best_answers
from electra_tf.finetuning.question_answering.model import ElectraQuestionAnswerer
from electra_tf.finetuning.question_answering.squad import QAExample, make_windows
from electra_tf.models.encoders import build_discriminator
from electra_tf.serving.publish import export_model

SEQ, STRIDE, QUERY, LONGEST, BEAM = 32, 8, 6, 5, 4
WORDS = ("the a river flows north through hills city was founded in 1902 by settlers who built library ##s ##ed "
         ". , ? when where what").split()
CONTEXT = ("The city was founded in 1902 by settlers, who built libraries. "
           "The river flows north through the hills. ") * 3
EXAMPLES = [QAExample("long", "When was the city founded?", CONTEXT), QAExample("no question", "", CONTEXT),
            QAExample("no context", "Where?", ""), QAExample("short", "What flows?", "Rivers flow north."),
            QAExample("accents", "Where?", "Thé rivér flows nörth."),
            QAExample("no spaces", "城市建于哪一年？", "河流向北流经山区。城市建于1902年。")]


@pytest.fixture(scope="module")
def export_for(tmp_path_factory):
    """head -> (model, tokenizer, the loaded export's serving_default), each made once."""
    made = {}

    def get(head):
        if head not in made:
            made[head] = _export(head, head == "electra", tmp_path_factory)
        return made[head]
    return get


def _export(head, answerable, tmp_path_factory):
    head, _, kind = head.partition("-")
    tokenizer = sentencepiece_tokenizer() if kind == "sentencepiece" else ElectraTokenizer(
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS])
    keras.utils.set_random_seed(0)
    config = PretrainingConfig.load("electra_tiny").replace(vocab_size=tokenizer.vocabulary_size, num_layers=1,
                                                        max_seq_length=SEQ)
    model = ElectraQuestionAnswerer(build_discriminator(config.model), head=head, answerable=answerable, beam_size=BEAM,
                                    max_query_length=QUERY, doc_stride=STRIDE, max_answer_length=LONGEST)
    path = export_model(model, tokenizer, BackboneConfig(config.model, SEQ), tmp_path_factory.mktemp("qa_export"),
                             "qa")
    return model, tokenizer, tf.saved_model.load(str(path)).signatures["serving_default"]


def sentencepiece_tokenizer():
    """A SentencePiece vocabulary learned from the examples' text (and Chinese, which has no spaces)."""
    from electra_tf.data.sentence_pieces import learn_sentencepiece
    from electra_tf.data.vocabulary_files import TokenizerSettings, model_pieces

    text = [e.question for e in EXAMPLES] + [e.context for e in EXAMPLES] + ["河流向北流经山区。城市建于1902年。"]
    model = learn_sentencepiece(text * 20, 80, lowercase=True)
    return ElectraTokenizer(model_pieces(model), TokenizerSettings.sentencepiece(), model)


def python_answer(model, tokenizer, example):
    """The fine-tuning run's way: windows, the model's beam per window, best_answers."""
    windows = make_windows(example, tokenizer, SEQ, STRIDE, QUERY)
    packed = {name: np.zeros((len(windows), SEQ), np.int32) for name in ("token_ids", "segment_ids", "padding_mask")}
    for row, window in enumerate(windows):
        packed["token_ids"][row, :len(window.token_ids)] = window.token_ids
        packed["segment_ids"][row, :len(window.token_ids)] = window.segment_ids
        packed["padding_mask"][row, :len(window.token_ids)] = 1
    out = {name: value.numpy() for name, value in model(packed, training=False).items()}
    beams = [WindowBeam(list(zip(out["start_top_index"][i], out["start_top_log_probs"][i])),
                        [list(zip(*pair)) for pair in zip(out["end_top_index"][i], out["end_top_log_probs"][i])],
                        float(out["answerable_logit"][i]) if "answerable_logit" in out else 0.0)
                   for i in range(len(windows))]
    return best_answers(example, windows, beams, max_answer_length=LONGEST), len(windows)


def serve(signature, questions, contexts):
    out = signature(question=tf.constant(questions, tf.string), context=tf.constant(contexts, tf.string))
    return {name: value.numpy() for name, value in out.items()}


# The plain head's cell (25 s) waits for `pytest -m slow`, for the default suite's time: its
# export is built in the default suite by test_kind's SQuAD 2.0 run.
@pytest.mark.parametrize("head", ["electra", "electra-sentencepiece", pytest.param("plain", marks=pytest.mark.slow)])
def test_the_export_answers_as_the_python_post_processing(export_for, head):
    model, tokenizer, signature = export_for(head)
    out = serve(signature, [e.question for e in EXAMPLES], [e.context for e in EXAMPLES])
    windows_seen = []
    for row, example in enumerate(EXAMPLES):
        expected, windows = python_answer(model, tokenizer, example)
        windows_seen.append(windows)
        answer = out["answer"][row].decode()
        start, end = int(out["answer_start"][row]), int(out["answer_end"][row])
        assert answer == expected.text, example.id
        assert example.context[start:end] == answer
        if answer:
            chosen = next(c for c in expected.n_best if c.text)  # an empty span (a lone "▁") is never the answer
            assert (start, end) == (chosen.start_char, chosen.end_char)
            assert np.isfinite(out["score"][row])
        if model.answerable:
            assert out["no_answer_probability"][row] == pytest.approx(1 / (1 + np.exp(-expected.null_score)),
                                                                      abs=1e-5)
    assert windows_seen[0] > 3  # the long context really is windowed
    assert "no_answer_probability" in out if model.answerable else "no_answer_probability" not in out
    no_context = [e.id for e in EXAMPLES].index("no context")
    assert out["answer"][no_context] == b"" and out["score"][no_context] == -np.inf
    assert out["answer_start"][no_context] == out["answer_end"][no_context] == 0


def test_huge_invalid_and_empty_input_is_defined(export_for):
    _, _, signature = export_for("electra")  # the graph around the model is the same for both heads
    huge = "The river flows north through the hills. " * 2400  # 100,800 characters
    out = serve(signature, ["Where?", "Where?"], [huge, b"The \xff river flows north."])
    answer = out["answer"][0].decode()
    assert huge[out["answer_start"][0]:out["answer_end"][0]] == answer
    repaired = "The \ufffd river flows north."
    assert repaired[out["answer_start"][1]:out["answer_end"][1]] == out["answer"][1].decode()
    empty = serve(signature, np.array([], object), np.array([], object))
    assert {name: value.shape[0] for name, value in empty.items()} == {name: 0 for name in empty}
