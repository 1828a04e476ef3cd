"""Stage 4, fine-tuning: labelled data, task models and their training.

- `tasks`: CSV/TSV/JSONL, GLUE and tagging (CoNLL, JSONL) files -> examples and labels, with
  file/line errors
- `classifiers`: `ElectraClassifier` (classification, pairs, regression), `ElectraTokenClassifier`
- `losses`: the tagging loss (classification and regression use Keras' own)
- `metrics`: accuracy, F1, Matthews correlation, Pearson, Spearman (the official GLUE metrics);
  per-word accuracy for tagging
- `callbacks`: progress, per-epoch evaluation that keeps the best epoch
- `run`: `run_finetuning`, the whole run behind `python -m electra_tf.finetune`
"""
