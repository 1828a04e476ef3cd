"""Small shared utilities, below every stage: nothing here imports TensorFlow at module level.

- `errors`: `ElectraError` and its subclasses, and `command`, which turns them into exit status 2
- `files`: atomic writes (a reader never sees half a file) and file digests
- `locking`: one writer per folder
- `progress`: progress lines with rate and ETA
- `run_dir`: the names of every file a model_dir, fine-tuning folder and export hold
- `logs`: TensorFlow's start-up logging, quietened before it loads
- `nvidia`: whether an NVIDIA driver is installed, asked before TensorFlow starts
"""
