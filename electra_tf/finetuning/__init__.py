"""Fine-tuning: every kind of labelled task as a task of the one trainer (`training/`).

- `config`: what a fine-tuning run is configured by (source, files, optimizer, run, the kind's own)
- `task`: `FinetuningTask`, what every kind shares (backbone, settings by model size, best epoch)
- `pretrained`: `load_pretrained`, the backbone from a model_dir, backbone folder, `.keras` file or export
- `text/`: labelled text: a class or score per text or pair (classes, pairs, regression, GLUE)
  and a tag per word (word tags, entities). The two share one file reader, one model base and
  one task (tagging extends classification), so they sit in one subpackage.
- `question_answering/`: extractive QA: SQuAD windows, the model, answers, the official scores.
"""
