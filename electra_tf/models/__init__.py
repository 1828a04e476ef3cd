"""Stage 2, models: ELECTRA's networks as Keras layers and models.

- `embeddings`: `ElectraEmbeddings`, the layer generator and discriminator share
- `encoders`: `Discriminator`, `Generator` (embeddings -> projection -> transformer stack -> head)
- `dropout`: Keras' Dropout drawing with the random-number algorithm named (Philox), and that name
- `heads`: `ReplacedTokenDetectionHead`, `MaskedLMHead` (tied to the word embeddings)
- `preprocessing`: text (pairs) and pre-split words -> ids in graph ops; Keras preprocessing layers
"""
