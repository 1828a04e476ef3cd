"""Serving: SavedModels for TensorFlow Serving and the requests they answer, above training.

- `publish`: writing a version folder atomically, with warmup requests and metadata, of a
  discriminator or of any task model (their signatures: `models/signatures.py` and the task
  models' `serving_endpoints`)
- `client`: REST and gRPC request helpers for the served model
"""
