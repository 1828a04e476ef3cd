"""Interop: released ELECTRA checkpoints and keras-hub presets in and out.

- `huggingface`: `save_pretrained` folders read and written with safetensors' numpy API (no torch)
- `google`: the official TF1 checkpoints (the released electra_small/base/large zips)
- `convert`: a checkpoint -> a model_dir every command accepts; the huggingface export format
- `question_answering`: transformers' question-answering head in and out
- `keras_hub_presets`: the keras_hub export format (presets for processes without the package),
  and a keras-hub preset -> a model_dir
"""
