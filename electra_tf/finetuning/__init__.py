"""Stage 4, fine-tuning: one run for every kind of task, each kind's modules together.

- `run`: `run_finetuning`, the whole run behind `python -m electra_tf.finetune`
- `task_kind`: `TaskKind`, what differs between kinds (reader, features, model, scores, files)
- `callbacks`: progress, per-epoch evaluation that keeps the best epoch
- `text/`: labelled text: a class or score per text or pair (classes, pairs, regression, GLUE)
  and a tag per word (word tags, entities). The two share one file reader, one model base and
  one kind (tagging extends classification), so they sit in one subpackage.
- `question_answering/`: extractive QA: SQuAD windows, the model, answers, the official scores.
"""
