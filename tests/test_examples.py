"""examples/bbc_news.py: the demo's data split (on a small stand-in corpus)."""

import csv
import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load_script():
    spec = importlib.util.spec_from_file_location("bbc_news", REPO / "examples" / "bbc_news.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_split_is_stratified_deterministic_and_reads_latin1(tmp_path):
    bbc = load_script()
    for topic, count in (("sport", 10), ("tech", 5)):
        (tmp_path / topic).mkdir()
        for n in range(count):
            (tmp_path / topic / f"{n:03d}.txt").write_bytes(
                f"Title {topic} {n}\n\nBody costs \xa35.\n".encode("latin-1"))
    train, dev = bbc.split(tmp_path, dev_fraction=0.2, seed=0)
    assert sorted(label for _, label in dev) == ["sport", "sport", "tech"]
    assert len(train) == 12 and not {t for t, _ in train} & {t for t, _ in dev}
    assert bbc.split(tmp_path, 0.2, 0) == (train, dev)
    assert train[0][0].startswith("Title ") and "\u00a35" in train[0][0] and "\n" not in train[0][0]
    rows = list(csv.reader(bbc.to_csv(train).splitlines()))
    assert rows[0] == ["text", "label"] and len(rows) == 13
