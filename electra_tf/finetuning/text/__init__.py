"""Labelled text: a class or score per text or pair, or a tag per word.

- `task_data`: CSV/TSV/JSONL, GLUE and tagging (CoNLL, JSONL) files -> examples and labels, with
  file/line errors
- `inputs`: what the task models' `fit`/`evaluate`/`predict` accept, as one dataset of strings
- `models`: `ElectraTaskModel`, `ElectraClassifier` (classification, pairs, regression), `ElectraTokenClassifier`
- `losses`: the tagging loss (classification and regression use Keras' own)
- `metrics`: accuracy, F1, Matthews correlation, Pearson, Spearman (the official GLUE metrics);
  per-word accuracy for tagging
- `entities`: entity chunks from tags and entity-level scores (CoNLL-2003)
- `prompts`, `prompt_model`: templates and label words filled in graph ops; `ElectraPromptClassifier`,
  classes from the replaced-token head (zero- and few-shot)
- `classification`, `prompting`, `tagging`: `ClassificationTask`, `PromptTask` and `TaggingTask`, the
  trainer's tasks
"""
