"""Fine-tuning: the kinds of labelled task, each a task of the one trainer (`training/`).

- `config`: `FinetuningConfig`: the kind, its own section, and the sections every kind shares
  (source, files, optimizer, run, trainer, runtime)
- `task`: `FinetuningTask`, what every kind shares (backbone, settings by model size, best epoch,
  a test file, evaluation alone)
- `pretrained`: `load_pretrained`, `load_task_model`: the one loader of every source
- `text/`: the kinds `classification` (a class or score per text or pair; GLUE) and `tagging` (a
  tag per word, entities), which share a file reader and a model base (`ElectraTaskModel`)
- `question_answering/`: the kind `question_answering`: SQuAD windows, the model, answers, scores
"""
