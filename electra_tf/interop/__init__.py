"""Interop: released ELECTRA checkpoints in and out.

- `names`: the one table of tensor names (ours, HuggingFace, Google TF1) and value layouts
- `huggingface`: `save_pretrained` folders read and written with safetensors' numpy API (no torch)
- `google`: the official TF1 checkpoints (the released electra_small/base/large zips)
- `convert`: a checkpoint -> a model_dir every command accepts, and a model_dir -> HuggingFace
"""
