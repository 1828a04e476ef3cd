"""Shared test fixtures: small corpora written for the tests (our own prose), the helpers that
build files and shards from them, a vocabulary learned from them, and a fresh-process runner.

Tests take the `corpus` fixture (a namespace of the texts and helpers below), `small_vocab`
and `run_python`; nothing is imported from another test file.
"""

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

# Scripts that make fixtures run by hand with the optional `.[reference]` extra (torch); with
# --doctest-modules pytest would import them.
collect_ignore_glob = ["fixtures/*"]

DOCUMENTS = [
    ["The river rises in the northern hills and flows south through three valleys.",
     "Farmers along its banks grow wheat, barley and apples.",
     "In spring the water is cold and fast. In late summer it slows and warms.",
     "A stone bridge built in the twelfth century still carries the old road across it."],
    ["The library opened in 1902 with four thousand books.",
     "Its reading room has tall windows facing the square, and the light is good all day.",
     "Children come after school to borrow novels, atlases and books about animals.",
     "The librarians keep a card catalogue as well as a computer index."],
    ["Bees visit the orchard every morning when the weather is warm.",
     "Each hive holds tens of thousands of workers and a single queen.",
     "The beekeeper checks the frames once a week and takes honey in autumn.",
     "Honey from apple blossom is pale and mild; honey from heather is dark and strong."],
    ["The town market is held on Saturdays in the square beside the library.",
     "Traders sell bread, cheese, vegetables, flowers and second-hand tools.",
     "Music plays near the fountain, and people stay to talk long after they have shopped."],
]


# The first documents again, in Chinese (written without spaces) and Korean (Hangul): the
# SentencePiece tests' text.
DOCUMENTS_ZH = [
    ["河流发源于北部山区，向南流经三个山谷。", "沿岸的农民种植小麦、大麦和苹果。", "春天河水又冷又急。夏末水流变缓，水也变暖。"],
    ["图书馆于1902年开放，当时有四千本书。", "阅览室的高窗朝向广场，整天光线都很好。", "孩子们放学后来借小说、地图册和关于动物的书。"],
]
DOCUMENTS_KO = [
    ["강은 북쪽 언덕에서 시작하여 세 골짜기를 지나 남쪽으로 흐른다.", "강가의 농부들은 밀과 보리와 사과를 기른다."],
    ["도서관은 1902년에 책 사천 권으로 문을 열었다.", "아이들은 방과 후에 와서 소설과 지도책을 빌린다."],
]


def write_sentence_file(path: Path, documents=DOCUMENTS, repeat: int = 1) -> Path:
    """One sentence per line, a blank line between documents (the official format)."""
    blocks = ["\n".join(document) for _ in range(repeat) for document in documents]
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return path


def write_prose_file(path: Path, documents=DOCUMENTS, repeat: int = 1) -> Path:
    """A paragraph per line (several sentences on a line), a blank line between documents."""
    blocks = [" ".join(document) for _ in range(repeat) for document in documents]
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return path


WIKI_PAGE = """<page><title>{title}</title><ns>{ns}</ns><id>{id}</id>{redirect}
<revision><id>1</id><text xml:space="preserve">{text}</text></revision></page>"""


def write_wiki_dump(path: Path, pages) -> Path:
    """A MediaWiki XML dump (bz2 if the name ends in .bz2) of (title, ns, text, redirect) pages."""
    import bz2
    from xml.sax.saxutils import escape

    body = "".join(WIKI_PAGE.format(title=title, ns=ns, id=i, text=escape(text),
                                    redirect='<redirect title="X" />' if redirect else "")
                   for i, (title, ns, text, redirect) in enumerate(pages))
    xml = ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/"><siteinfo>'
           "<sitename>Test</sitename></siteinfo>" + body + "</mediawiki>")
    data = xml.encode("utf-8")
    path.write_bytes(bz2.compress(data) if path.suffix == ".bz2" else data)
    return path


ARTICLE = """{{Infobox river|name=Test}}
'''The river''' rises in the [[hills|northern hills]] and flows south.<ref>A source.</ref>
[[File:River.jpg|thumb|200px|A picture caption]]
== Course ==
It passes three valleys and a stone bridge built in the twelfth century.
{| class="wikitable"
| cell one || cell two
|}
Farmers along its banks grow wheat, barley and apples.
[[Category:Rivers]]"""

ONLY_MARKUP = """{{Infobox|a=b}}
[[File:Only.png|thumb|caption]]
{| class="wikitable"
| x || y
|}
[[Category:Empty]]"""


def build_test_shards(folder: Path, vocab: Path, max_seq_length: int, num_shards: int, repeat: int,
                      held_out: float = 0.0) -> Path:
    """Shards of the test corpus (and its held-out split, with `held_out`), built in one worker process."""
    from electra_tf.data.builder import BuildRunner, ShardSpec, build_shards

    text = write_sentence_file(folder / "corpus.txt", repeat=repeat)
    output = folder / "data"
    build_shards(output, [str(text)], ShardSpec(max_seq_length, num_shards, held_out=held_out), vocab=vocab,
                 runner=BuildRunner(num_workers=1))
    return output


def built_once(tmp_path_factory, name: str, build) -> Path:
    """A folder that `build(folder)` fills once per test session, however many test processes
    (pytest-xdist) need it: the first to ask builds it under a file lock, the others wait for
    it and reuse it. For what tests only read (a finished run, shards): a fixture costing tens
    of seconds was otherwise built again by each process that ran one of its tests."""
    import fcntl
    import shutil

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's folder, above each process's own
    folder = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (folder / ".built").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            build(folder)
            (folder / ".built").touch()
    return folder


def run_python(code: str):
    """Runs `code` in a fresh Python process (TensorFlow only, as a model server has) and returns
    the JSON its last output line holds."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def corpus():
    return types.SimpleNamespace(
        DOCUMENTS=DOCUMENTS, DOCUMENTS_ZH=DOCUMENTS_ZH, DOCUMENTS_KO=DOCUMENTS_KO, ARTICLE=ARTICLE,
        ONLY_MARKUP=ONLY_MARKUP, write_sentence_file=write_sentence_file, write_prose_file=write_prose_file,
        write_wiki_dump=write_wiki_dump, build_test_shards=build_test_shards)


@pytest.fixture(scope="session", name="run_python")
def run_python_fixture():
    return run_python


@pytest.fixture(scope="session")
def small_vocab(tmp_path_factory):
    """A WordPiece vocabulary learned from the test corpus (a few hundred tokens)."""
    import tensorflow as tf

    from electra_tf.data.tokenization import learn_vocabulary
    from electra_tf.data.vocabulary_files import TokenizerSettings, write_vocabulary

    # Repeated, so whole words are frequent enough to become vocabulary entries.
    sentences = [sentence for document in DOCUMENTS for sentence in document] * 30
    vocabulary = learn_vocabulary(tf.data.Dataset.from_tensor_slices(sentences).batch(100), 400)
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    write_vocabulary(path, vocabulary, TokenizerSettings())  # with its tokenizer_config.json, as build_vocab writes
    return path


@pytest.fixture(scope="session")
def sentencepiece_vocab(tmp_path_factory):
    """A SentencePiece (unigram, uncased) vocabulary folder learned from the test corpus in three
    languages: vocab.txt, spm.model and tokenizer_config.json."""
    from electra_tf.data.vocabulary import VocabularySpec, build_vocabulary
    from electra_tf.data.vocabulary_files import TokenizerSettings

    folder = tmp_path_factory.mktemp("sentencepiece")
    text = folder / "corpus.txt"
    write_sentence_file(text, DOCUMENTS + DOCUMENTS_ZH + DOCUMENTS_KO, repeat=20)
    build_vocabulary([str(text)], folder / "vocab.txt", VocabularySpec(size=300, settings=TokenizerSettings.sentencepiece()))
    text.unlink()
    return folder / "vocab.txt"


@pytest.fixture(autouse=True)
def _restore_the_global_dtype_policy():
    """A test that sets Keras' global precision policy (mixed precision tests) must not leave
    the tests after it building models under that policy."""
    import keras

    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)


@pytest.fixture(autouse=True)
def _no_signal_handler_outlives_its_test():
    """A run that ends, however it ends, gives SIGTERM/SIGINT back to the handlers it found: one
    left behind would swallow the next Ctrl-C or preemption notice in that process."""
    import signal

    before = {number: signal.getsignal(number) for number in (signal.SIGTERM, signal.SIGINT)}
    yield
    after = {number: signal.getsignal(number) for number in before}
    for number, handler in before.items():
        signal.signal(number, handler)
    assert after == before, f"the test left signal handlers installed: {after}"


def pretrained_run_argv(root: Path) -> list[str]:
    """The arguments of `pretrained_run` (no --export_dir: it exports inside its model_dir)."""
    return ["--data", str(root / "data"), "--model_dir", str(root / "electra_tiny"), "--steps", "4",
            "--batch_size", "4", "--set", "num_layers=1", "--log_every", "2", "--eval_batches", "1"]


@pytest.fixture(scope="session")
def pretrained_run(small_vocab, tmp_path_factory):
    """A short real pre-training run of `electra_tiny` with one layer: a model_dir as command 1
    leaves it, smaller (the docs' Python blocks use it as `runs/electra_tiny`). Built once for
    all test processes: tests read it, or rerun a copy."""
    def build(root):
        from electra_tf import pretrain

        build_test_shards(root, small_vocab, max_seq_length=128, num_shards=1, repeat=10)
        assert pretrain.main(pretrained_run_argv(root)) == 0

    return built_once(tmp_path_factory, "pretrained_run", build) / "electra_tiny"


SHORT_RUN_SEQ = 32


@pytest.fixture(scope="session")
def short_run(small_vocab, tmp_path_factory):
    """ROOT of a 12-step pre-training run at sequence length 32 (ROOT/run), exported on finish
    (ROOT/exports/run/1): what fine-tuning and export tests start from. Built once for all test
    processes: tests read it, or work on a copy."""
    def build(root):
        from electra_tf import pretrain

        data = build_test_shards(root, small_vocab, SHORT_RUN_SEQ, num_shards=1, repeat=10)
        assert pretrain.main(["--data", str(data), "--model_dir", str(root / "run"), "--export_dir",
                              str(root / "exports"), "--steps", "12", "--batch_size", "4", "--set", "num_layers=1",
                              "--set", f"max_seq_length={SHORT_RUN_SEQ}", "--log_every", "6",
                              "--eval_batches", "1"]) == 0

    return built_once(tmp_path_factory, "short_run", build)
