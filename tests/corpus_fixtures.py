"""Small corpora written for the tests (our own prose), and helpers to build from them."""

from pathlib import Path

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
    from xml.sax.saxutils import escape
    import bz2

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


def build_test_shards(folder: Path, vocab: Path, max_seq_length: int, num_shards: int, repeat: int) -> Path:
    """Shards of the test corpus, built by build_data in one worker process."""
    from electra_tf import build_data

    text = write_sentence_file(folder / "corpus.txt", repeat=repeat)
    output = folder / "data"
    code = build_data.main(["--input", str(text), "--vocab", str(vocab), "--output_dir", str(output),
                            "--max_seq_length", str(max_seq_length), "--num_shards", str(num_shards),
                            "--num_workers", "1"])
    assert code == 0
    return output
