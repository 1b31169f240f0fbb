"""pipeline/sources/encoding.py with the reader: an export in UTF-16 or a single-byte encoding reads
as its UTF-8 original; an encoding the reader cannot read is named when planning; a byte that is
not UTF-8 rejects its page only, naming the byte, its offset and line, in every container."""

import bz2
import gzip

import pytest

from pipeline.sources import InputError, plan_work_items, read_pages
from pipeline.sources.encoding import Utf8Repair, declared


def _declare(text: str, name: str) -> str:
    return f'<?xml version="1.0" encoding="{name}"?>\n{text}'


@pytest.mark.parametrize("codec, name", [
    ("utf-16", "UTF-16"),  # little-endian with a byte-order mark, as Python writes it
    ("utf-16-be", "UTF-16"),  # no mark: told by the first `<`
    ("utf-16-le", None),  # no mark, no declaration
    ("latin-1", "ISO-8859-1"),
    ("cp1251", "windows-1251"),  # a single-byte codec expat reads through pyexpat
])
def test_other_encodings_read_as_the_utf8_original(codec, name, sample_xml, tmp_path, fields, read_all):
    lang = "ru" if codec == "cp1251" else "en"
    text = sample_xml[lang].read_text(encoding="utf-8")
    if codec in ("latin-1", "cp1251"):  # keep the pages these encodings can write
        text = text.encode(codec, "replace").decode(codec)
    original, path = tmp_path / "original.xml", tmp_path / "other" / sample_xml[lang].name
    original.write_text(text, encoding="utf-8")
    path.parent.mkdir()
    path.write_bytes((_declare(text, name) if name else text).encode(codec))
    want = [fields(p) for p in read_all(plan_work_items([str(original)]))]
    assert len(want) > 5 and [fields(p) for p in read_all(plan_work_items([str(path)]))] == want


def test_an_encoding_it_cannot_read_is_named_when_planning(sample_xml, tmp_path):
    path = tmp_path / "jawiki-pages-articles.xml"
    path.write_bytes(_declare(sample_xml["en"].read_text(encoding="utf-8"), "Shift_JIS").encode("shift_jis", "replace"))
    with pytest.raises(InputError, match=rf"^{path}: its XML declaration names encoding 'Shift_JIS', which the XML reader "
                                         r"does not read .*iconv -f Shift_JIS -t UTF-8"):
        plan_work_items([str(path)])
    wrong = tmp_path / "enwiki-pages-articles.xml"
    wrong.write_bytes(_declare(sample_xml["en"].read_text(encoding="utf-8"), "UTF-16").encode("utf-8"))
    with pytest.raises(InputError, match=rf"^{wrong}: its XML declaration says encoding 'UTF-16', but its first bytes"):
        plan_work_items([str(wrong)])


def _with_bad_byte(data: bytes, title: bytes, bad: bytes = b"\xff") -> tuple[bytes, int, int]:
    """`data` with `bad` put in the text of the page titled `title`: (bytes, offset, line)."""
    at = data.index(b">", data.index(b"<text", data.index(b"<title>" + title + b"</title>"))) + 4
    return data[:at] + bad + data[at:], at, data[:at].count(b"\n") + 1


def _multistream(data: bytes, folder, name: str, pages_per_stream: int = 3):
    """Wikimedia's multistream layout from bytes that are not all UTF-8 (conftest's make_multistream
    reads text): a header stream, streams of pages, a footer stream, and the index. Returns the
    dump and where in `data` each stream starts."""
    starts = [i for i in range(len(data)) if data.startswith(b"  <page>", i)]
    cuts = [starts[0], *starts[pages_per_stream::pages_per_stream], data.rindex(b"</mediawiki>")]
    dump = folder / f"{name}-multistream.xml.bz2"
    streams = [data[: cuts[0]], *(data[a:b] for a, b in zip(cuts, cuts[1:])), data[cuts[-1]:]]
    offsets, lines = [0], []
    for stream in streams:
        offsets.append(offsets[-1] + len(bz2.compress(stream)))
    for offset, stream in zip(offsets[1:-2], streams[1:-1]):
        lines += [f"{offset}:{n}:page\n" for n in range(stream.count(b"<page>"))]
    dump.write_bytes(b"".join(bz2.compress(stream) for stream in streams))
    (folder / f"{name}-multistream-index.txt.bz2").write_bytes(bz2.compress("".join(lines).encode()))
    return dump, [0, *cuts]


@pytest.mark.parametrize("container", ["xml", "xml.bz2", "xml.gz", "multistream"])
def test_a_byte_that_is_not_utf8_rejects_its_page_only(container, sample_xml, tmp_path, fields, read_all):
    title = "Port Savile"  # in the second range of the multistream dump: offsets of that range's data
    data, at, line = _with_bad_byte(sample_xml["en"].read_bytes(), title.encode())
    name = "enwiki-20261101-pages-articles"
    if container == "multistream":
        path, starts = _multistream(data, tmp_path, name)
        start = max(s for s in starts if s <= at)
        at, line = at - start, data[start:at].count(b"\n") + 1
    else:
        path = tmp_path / f"{name}.{container}"
        path.write_bytes({"xml": bytes, "xml.bz2": bz2.compress, "xml.gz": gzip.compress}[container](data))
    pages = read_all(plan_work_items([str(path)]))
    want = read_all(plan_work_items([str(sample_xml["en"])]))
    (bad,) = [p for p in pages if p.error and "UTF-8" in p.error]
    assert bad.title == title and ("@" in bad.source) == (container == "multistream")
    where = "byte" if container == "xml" else "decompressed byte"
    assert bad.error == f"invalid UTF-8 byte 0xFF at {where} {at} (line {line})"
    # Every other page is read as it was, the sample's own malformed ones included.
    assert [fields(p) for p in pages if p is not bad] == [fields(p) for p in want if p.title != title]


def test_bytes_outside_a_page_or_inside_markup_fail_naming_them(sample_xml, tmp_path, read_all):
    data = sample_xml["en"].read_bytes()
    header = tmp_path / "a-pages-articles.xml"
    at = data.index(b"<sitename>") + 10
    header.write_bytes(data[:at] + b"\xe9" + data[at:])
    with pytest.raises(InputError, match=rf"^{header}: invalid UTF-8 byte 0xE9 at byte {at} \(line 3\) outside any <page>"):
        plan_work_items([str(header)])  # in the <siteinfo>: seen when planning
    between = tmp_path / "b-pages-articles.xml"
    at = data.index(b"</page>") + 7
    between.write_bytes(data[:at] + b"\xc3" + data[at:])  # a cut two-byte sequence
    (item,) = plan_work_items([str(between)])
    with pytest.raises(InputError, match=rf"^{between}: invalid UTF-8 byte 0xC3 at byte {at} .* outside any <page>"):
        list(read_pages(item))
    tag = tmp_path / "c-pages-articles.xml"
    at = data.index(b"<title>", 9000) + 3
    tag.write_bytes(data[:at] + b"\xe9" + data[at:])
    (item,) = plan_work_items([str(tag)])
    with pytest.raises(InputError, match=rf"^{tag}: malformed XML at line \d+, column \d+, in the <page> at line \d+ "
                                         rf"\(byte {at}\): invalid UTF-8 byte 0xE9 at byte {at} .* inside the markup"):
        list(read_pages(item))


def test_repair_keeps_sequences_cut_between_pieces_and_every_offset():
    text = "Žluťoučký kůň\n€ 😀\n".encode("utf-8")
    data = text[:4] + b"\xff\xfe" + text[4:] + b"\xe2\x82"  # two bad bytes after `Žlu`, and a sequence cut at the end
    for size in (1, 2, 3, 7, len(data)):  # every multi-byte character cut between pieces somewhere
        repair = Utf8Repair()
        out = b"".join(repair.repair(data[i : i + size]) for i in range(0, len(data), size)) + repair.repair(b"", final=True)
        assert out == text[:4] + b"??" + text[4:] + b"??" and len(out) == len(data)
        assert [(b.offset, b.line, b.data) for b in repair.found] == [(4, 1, b"\xff"), (5, 1, b"\xfe"), (len(data) - 2, 3, b"\xe2\x82")]


def test_declared_encodings():
    assert declared(b'<?xml version="1.0" encoding="ISO-8859-1"?><m/>') == "ISO-8859-1"
    assert declared("<m/>".encode("utf-16")) == "UTF-16" and declared("<m/>".encode("utf-16-be")) == "UTF-16"
    assert declared(b"\xef\xbb\xbf<m/>") == "UTF-8" and declared(b'<?xml version="1.0"?><m/>') is None
