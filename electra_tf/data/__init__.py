"""Stage 1, data: text in, pre-training shards and vocabularies out.

- `corpus`, `records`: text files, MediaWiki dumps and records -> documents of sentences
- `vocabulary_files`: vocabulary files and their settings, read and written without TensorFlow
- `tokenization`: `ElectraTokenizer`, the one in-graph tokenizer (WordPiece or SentencePiece)
- `vocabulary`, `sentence_pieces`: `build_vocabulary`, a vocabulary learned from a corpus
- `token_offsets`: word pieces with the characters they came from, in graph
- `packing`: the official rules for packing sentences into examples
- `shards`: the shard format (TFRecords + metadata.json), written and read only there
- `builder`, `beam_builder`: `build_shards`, behind `python -m electra_tf.build_data`, and its Beam pipeline
"""
