"""Whole-word answers, measured: one fine-tuned question answerer, its answers cut by word-piece
offsets (the behaviour before whole-word widening) and widened to whole words (now), scored
with the official SQuAD 1.1 EM / F1, and the share of answers that start or end inside a word
of the context, next to the same share for the gold answers.

    python examples/qa_whole_words.py --model runs/squad_trial/best.keras --eval data/squad/dev-1000.json

"Inside a word": the character before the answer's first character, or after its last, is a
letter, digit or mark continuing the same word (`data/token_offsets.is_word_character`; CJK
characters are words of their own).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def cut_inside_a_word(context: str, start: int, end: int) -> bool:
    from electra_tf.data.token_offsets import is_word_character

    if start >= end:
        return False
    return (start > 0 and is_word_character(context[start]) and is_word_character(context[start - 1])) or \
        (end < len(context) and is_word_character(context[end - 1]) and is_word_character(context[end]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a fine-tuned ElectraQuestionAnswerer (best.keras)")
    parser.add_argument("--eval", required=True, help="a SQuAD 1.1 file")
    parser.add_argument("--batch_size", type=int, default=32)
    args = parser.parse_args(argv)

    from electra_tf.finetune import build_parser, task_from_args
    from electra_tf.finetuning.question_answering import answers as qa_answers, metrics as qa_metrics
    from electra_tf.finetuning.pretrained import load_task_model

    model, tokenizer, config = load_task_model(args.model)
    task = task_from_args(build_parser().parse_args(
        ["--pretrained", args.model, "--task", "squad", "--train", args.eval, "--eval", args.eval,
         "--output_dir", "unused", "--batch_size", str(args.batch_size)]))
    _, data = task.prepare(task.read_files(), tokenizer, config.max_seq_length, seed=0)
    examples = data.eval.examples
    gold = {e.id: [text for text, _ in e.answers] for e in examples}
    inside = sum(cut_inside_a_word(e.context, start, start + len(text)) for e in examples
                 for text, start in e.answers[:1])
    print(f"{len(examples):,} questions; gold first answers cut inside a word: {inside} "
          f"({100.0 * inside / len(examples):.2f}%)")
    whole_words = qa_answers.whole_word_span
    for name, rule in (("piece offsets (before)", lambda text, start, end: (start, end)),
                       ("whole words (now)", whole_words)):
        qa_answers.whole_word_span = rule
        answers = task.answers(model, data)
        predictions = {qid: answer.text for qid, answer in answers.items()}
        scores = qa_metrics.evaluate_v1(gold, predictions)
        best = {qid: answer.n_best[0] for qid, answer in answers.items() if answer.n_best}
        contexts = {e.id: e.context for e in examples}
        cut = sum(cut_inside_a_word(contexts[qid], c.start_char, c.end_char) for qid, c in best.items())
        print(f"{name:24s} EM {scores['exact_match']:.2f}  F1 {scores['f1']:.2f}  answers cut inside a word: "
              f"{cut} ({100.0 * cut / len(examples):.2f}%)", flush=True)
    qa_answers.whole_word_span = whole_words
    return 0


if __name__ == "__main__":
    sys.exit(main())
