"""Stage 5, serving: SavedModels for TensorFlow Serving and the requests they answer.

- `signatures`: the text-in and ids-in graph functions of a discriminator or classifier
- `publish`: writing a version folder atomically, with warmup requests and metadata
- `client`: REST and gRPC request helpers for the served model
"""
