"""Serving: the export formats and what they write, above training.

- `exports`: the formats' registry (`register_format`), `load_source` (any run's served model),
  the export after a run (`--export FORMAT ...`)
- `publish`: the saved_model format: a version folder for TensorFlow Serving written atomically,
  with warmup requests and metadata, of any model that gives `serving_endpoints`
- `litert`: the litert format: one .tflite file that takes text, for devices
- `client`: REST and gRPC request helpers for the served model

The keras_hub and huggingface formats are in `interop/`.
"""
