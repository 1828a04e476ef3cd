"""Stage 1, data: text in, pre-training shards and vocabularies out.

- `corpus`: text files and MediaWiki dumps -> documents of sentences; skipped input counted
- `tokenization`: `ElectraTokenizer`, the one in-graph WordPiece tokenizer; vocabulary files
- `vocabulary`: `build_vocabulary`, a WordPiece vocabulary learned from a corpus
- `packing`: `ExamplePacker`, the official rules for packing sentences into examples
- `shards`: the shard format (TFRecords + metadata.json), written and read only there
- `builder`: `build_shards`, the parallel builder behind `python -m electra_tf.build_data`
"""
