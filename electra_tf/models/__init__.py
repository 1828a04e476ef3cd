"""Stage 2, models: ELECTRA's networks as Keras layers and models, and what they serve.

- `config`: `ModelConfig`; `weight_names`: the one table of tensor names across formats
- `embeddings`: `ElectraEmbeddings`, the layer generator and discriminator share
- `encoders`: `Discriminator`, `Generator` (embeddings -> projection -> transformer stack -> head)
- `transformer`, `fused`, `dropout`: BERT's block; its fused training stretches; dropout with Philox
- `heads`: `ReplacedTokenDetectionHead`, `MaskedLMHead` (tied to the word embeddings)
- `backbone`, `keras_hub_electra`: the discriminator as a keras-hub-layout preset; keras-hub's own
  ElectraBackbone presets read as one
- `preprocessing`: text (pairs) and pre-split words -> ids in graph ops; Keras preprocessing layers
- `signatures`, `device_inputs`: the endpoints an export serves; a LiteRT file's inputs
"""
