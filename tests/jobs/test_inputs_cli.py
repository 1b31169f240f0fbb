"""`canine preprocess` on older and odder exports, and on a network that fails, as a user meets them:
`python -m jobs.cli` in a process of its own, from another working directory where paths matter.

- export schemas 0.3 and 0.4 (no <ns>; 0.4's page-level <redirect />) are read and counted;
- UTF-16 and single-byte encodings read as their UTF-8 originals; an invalid UTF-8 byte rejects
  its page only, named in rejects/; an encoding the reader cannot read is named;
- malformed XML in every container is one line naming file, position and expat's reason;
- a mirror, an input URL or a Dataflow endpoint that cannot be reached is named with its host and
  what failed (a closed port on 127.0.0.1, a name under `.invalid`), never as a missing file; an
  HTTP mirror that answers (Python's http.server, started here) says what it lacks.
"""

import bz2
import gzip
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "pipeline" / "sample"
FAST = ["--seq-len", "512", "--vocab-size", "600"]


def _canine(*args, cwd, env=None, timeout=300):
    """`canine ARGS` as a user runs it, from the working directory `cwd`; no proxy of the developer's."""
    base = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "no_proxy")}
    return subprocess.run([sys.executable, "-m", "jobs.cli", *map(str, args)], cwd=cwd,
                          env={**base, "PYTHONPATH": str(ROOT), **(env or {})}, capture_output=True, text=True,
                          timeout=timeout)


def _last_line(result) -> str:
    """The line `canine preprocess` ends a failure with, without its prefix."""
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("canine preprocess: "), result.stderr[-3000:]
    return line.removeprefix("canine preprocess: ")


def _manifest(result) -> dict:
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- export schemas 0.3 and 0.4 ------------------------------------------------------------------
# In the shape MediaWiki 1.5-1.8 (2005-2006) wrote from Special:Export and dumpBackup.php, schema
# docs/export-0.3.xsd: <siteinfo> with <namespaces> (keys, no case attribute), pages with title,
# id and revisions, no <ns> and no redirect flag. The page texts are written for this test.
EXPORT_03 = """<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.3/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://www.mediawiki.org/xml/export-0.3/ http://www.mediawiki.org/xml/export-0.3.xsd" version="0.3" xml:lang="en">
  <siteinfo>
    <sitename>Wikipedia</sitename>
    <base>http://en.wikipedia.org/wiki/Main_Page</base>
    <generator>MediaWiki 1.7alpha</generator>
    <case>first-letter</case>
      <namespaces>
      <namespace key="-2">Media</namespace>
      <namespace key="-1">Special</namespace>
      <namespace key="0" />
      <namespace key="1">Talk</namespace>
      <namespace key="2">User</namespace>
      <namespace key="3">User talk</namespace>
      <namespace key="4">Wikipedia</namespace>
      <namespace key="5">Wikipedia talk</namespace>
      <namespace key="6">Image</namespace>
      <namespace key="7">Image talk</namespace>
      <namespace key="8">MediaWiki</namespace>
      <namespace key="9">MediaWiki talk</namespace>
      <namespace key="10">Template</namespace>
      <namespace key="11">Template talk</namespace>
      <namespace key="12">Help</namespace>
      <namespace key="13">Help talk</namespace>
      <namespace key="14">Category</namespace>
      <namespace key="15">Category talk</namespace>
      <namespace key="100">Portal</namespace>
      <namespace key="101">Portal talk</namespace>
    </namespaces>
  </siteinfo>
{pages}
</mediawiki>
"""
PAGE = """  <page>
    <title>{title}</title>
    <id>{id}</id>{redirect}
    <revision>
      <id>{rev}</id>
      <timestamp>2006-03-02T18:31:07Z</timestamp>
      <contributor>
        <username>Example</username>
        <id>42</id>
      </contributor>
      <comment>copyedit</comment>
      <text xml:space="preserve">{text}</text>
    </revision>
  </page>"""
ARTICLE = ("'''{0}''' is a river town on the northern plain. It grew around a ford and a market, and its "
           "bridge of 1820 still carries the main road.\n\n== History ==\nThe town was first named in a charter "
           "of 1204, when the abbey held the ford. A canal reached it in 1790.")
# (title, text, is a redirect): 3 articles (one with a colon that names no namespace), 1 redirect,
# 6 pages of other namespaces (Portal only by the <siteinfo>).
PAGES = [
    ("Ashford Mill", ARTICLE.format("Ashford Mill"), False),
    ("Talk:Ashford Mill", "Is the date of the bridge right?", False),
    ("User:Example", "I edit pages about rivers.", False),
    ("Wikipedia:Manual of Style", "How pages are written.", False),
    ("Image:Ashford bridge.jpg", "The bridge in 1905.", False),
    ("Portal:Rivers", "Pages about rivers.", False),
    ("Category:River towns", "Towns on rivers.", False),
    ("Star Trek: The Motion Picture", ARTICLE.format("Star Trek: The Motion Picture"), False),
    ("Ashford", "#REDIRECT [[Ashford Mill]]", True),
    ("Brenton", ARTICLE.format("Brenton"), False),
]


def _export(version: str) -> str:
    """EXPORT_03, or the same pages as schema 0.4 writes them: with a page-level <redirect />."""
    pages = "\n".join(PAGE.format(title=t, id=i, rev=100 + i, text=x,
                                  redirect="\n    <redirect />" if r and version != "0.3" else "")
                      for i, (t, x, r) in enumerate(PAGES, 1))
    return EXPORT_03.replace("0.3", version).format(pages=pages)


def test_exports_of_schemas_0_3_and_0_4_are_read_and_counted(tmp_path):
    (tmp_path / "exports").mkdir()
    (tmp_path / "elsewhere").mkdir()
    for version in ("0.3", "0.4"):
        (tmp_path / "exports" / f"enwiki-2006-export-{version}.xml").write_text(_export(version), encoding="utf-8")
    result = _canine("preprocess", "../exports/enwiki-2006-export-0.3.xml", "../exports/enwiki-2006-export-0.4.xml",
                     "--output", "out", *FAST, "--json", cwd=tmp_path / "elsewhere")
    en = _manifest(result)["languages"]["en"]
    # Each file: 10 pages, 6 outside the main namespace, 1 redirect, 3 articles, none a parse error.
    counts = {k: en[k] for k in ("pages_read", "non_article", "redirects", "parse_errors", "kept")}
    assert counts == {"pages_read": 20, "non_article": 12, "redirects": 2, "parse_errors": 0, "kept": 6}
    assert (tmp_path / "elsewhere" / "out" / "_manifest.json").is_file()


# --- encodings -----------------------------------------------------------------------------------


def _languages(manifest: dict) -> dict:
    """The page counts per language: what the reader and the cleaner decided (examples and masks
    depend on the tokenizer, which is trained on every language's pages)."""
    keys = ("pages_read", "kept", "redirects", "non_article", "parse_errors", "empty", "dropped", "replaced_characters")
    return {lang: {k: counts[k] for k in keys} for lang, counts in manifest["languages"].items()}


def test_utf16_and_single_byte_exports_read_as_utf8_and_a_bad_byte_rejects_one_page(tmp_path):
    """One run of UTF-8 originals, one of the same pages as UTF-16 (ko), ISO-8859-1 (en) and with an
    invalid UTF-8 byte in one article (ru): the same counts, but for that page, rejected by name."""
    (tmp_path / "utf8").mkdir()
    (tmp_path / "other").mkdir()
    ko = (SAMPLE / "kowiki-20261101-pages-articles.xml").read_text(encoding="utf-8")
    en = (SAMPLE / "enwiki-20261101-pages-articles.xml").read_text(encoding="utf-8")
    en = en.encode("latin-1", "replace").decode("latin-1")  # the pages ISO-8859-1 can write
    ru = (SAMPLE / "ruwiki-20261101-pages-articles.xml").read_bytes()
    for name, text in (("ko", ko), ("en", en)):
        (tmp_path / "utf8" / f"{name}wiki-20261101-pages-articles.xml").write_text(text, encoding="utf-8")
    (tmp_path / "utf8" / "ruwiki-20261101-pages-articles.xml").write_bytes(ru)
    (tmp_path / "other" / "kowiki-20261101-pages-articles.xml").write_bytes(
        ('<?xml version="1.0" encoding="UTF-16"?>\n' + ko).encode("utf-16"))
    (tmp_path / "other" / "enwiki-20261101-pages-articles.xml").write_bytes(
        ('<?xml version="1.0" encoding="ISO-8859-1"?>\n' + en).encode("latin-1"))
    # An invalid byte (0xFF) in the text of the first page that the UTF-8 run keeps.
    first_text = ru.index(b">", ru.index(b"<text", ru.index(b"<ns>0</ns>"))) + 1
    title = ru[ru.rindex(b"<title>", 0, first_text) + 7 : ru.rindex(b"</title>", 0, first_text)].decode()
    at = first_text + 10
    (tmp_path / "other" / "ruwiki-20261101-pages-articles.xml").write_bytes(ru[:at] + b"\xff" + ru[at:])

    original = _languages(_manifest(_canine("preprocess", *sorted((tmp_path / "utf8").iterdir()), "--output",
                                            tmp_path / "out-utf8", *FAST, "--json", cwd=tmp_path)))
    result = _canine("preprocess", *sorted((tmp_path / "other").iterdir()), "--output", tmp_path / "out-other",
                     *FAST, "--json", cwd=tmp_path)
    other = _languages(_manifest(result))
    assert other["ko"] == original["ko"] and other["en"] == original["en"]
    assert original["ru"]["kept"] > 1 and original["ru"]["parse_errors"] >= 0
    assert other["ru"]["kept"] == original["ru"]["kept"] - 1
    assert other["ru"]["parse_errors"] == original["ru"]["parse_errors"] + 1
    rejects = [json.loads(line) for line in (tmp_path / "out-other" / "_rejects" / "ru.jsonl").read_text().splitlines()]
    (bad,) = [r for r in rejects if "UTF-8" in r["reason"]]
    line = ru[:at].count(b"\n") + 1
    assert bad["title"] == title and bad["reason"].endswith(f"invalid UTF-8 byte 0xFF at byte {at} (line {line})")


def test_an_encoding_the_reader_cannot_read_is_named(tmp_path):
    text = (SAMPLE / "enwiki-20261101-pages-articles.xml").read_text(encoding="utf-8")
    path = tmp_path / "enwiki-20261101-pages-articles.xml"
    path.write_bytes(('<?xml version="1.0" encoding="Shift_JIS"?>\n' + text).encode("shift_jis", "replace"))
    result = _canine("preprocess", path.name, "--output", "out", cwd=tmp_path)
    assert result.returncode == 2
    assert _last_line(result).startswith(f"{path}: its XML declaration names encoding 'Shift_JIS', which the XML "
                                         "reader does not read")
    assert not (tmp_path / "out").exists()


# --- malformed XML in every container ------------------------------------------------------------


def _multistream(text: str, folder: Path) -> Path:
    """A multistream dump of `text` (header stream, two pages a stream, footer stream) and its index."""
    import re

    starts = [m.start() for m in re.finditer(r"  <page>", text)]
    cuts = [starts[0], *starts[2::2], text.rindex("</mediawiki>")]
    streams = [text[: cuts[0]], *(text[a:b] for a, b in zip(cuts, cuts[1:])), text[cuts[-1]:]]
    data = [bz2.compress(s.encode()) for s in streams]
    offsets = [sum(len(d) for d in data[:i]) for i in range(len(data))]
    index = "".join(f"{off}:{n}:page\n" for off, s in zip(offsets[1:-1], streams[1:-1]) for n in range(s.count("<page>")))
    dump = folder / "enwiki-20261101-pages-articles-multistream.xml.bz2"
    dump.write_bytes(b"".join(data))
    (folder / "enwiki-20261101-pages-articles-multistream-index.txt.bz2").write_bytes(bz2.compress(index.encode()))
    return dump


@pytest.mark.parametrize("container", ["xml", "xml.bz2", "xml.gz", "multistream"])
def test_malformed_xml_is_one_line_naming_file_position_and_reason(container, tmp_path):
    text = (SAMPLE / "enwiki-20261101-pages-articles.xml").read_text(encoding="utf-8")
    at = text.index("</timestamp>", len(text) // 2)  # in a page of the second half: found while reading
    bad = text[:at] + "</timestamq>" + text[at + len("</timestamp>"):]
    line = bad[:at].count("\n") + 1
    name = "enwiki-20261101-pages-articles"
    if container == "multistream":
        path = _multistream(bad, tmp_path)
    else:
        path = tmp_path / f"{name}.{container}"
        path.write_bytes({"xml": bytes, "xml.bz2": bz2.compress, "xml.gz": gzip.compress}[container](bad.encode()))
    result = _canine("preprocess", path.name, "--output", "out", *FAST, cwd=tmp_path)
    assert result.returncode == 2
    message = _last_line(result)
    assert message.startswith(f"{path}: malformed XML at line ") and message.endswith(": mismatched tag")
    if container != "multistream":  # a range counts lines from its own first byte
        assert f"at line {line}, column " in message
    assert "in the <page> at line" in message and ("decompressed byte" in message) == (container != "xml")


# --- the network ---------------------------------------------------------------------------------


@pytest.fixture
def http_mirror(tmp_path):
    """A real HTTP server (python -m http.server) on 127.0.0.1 serving tmp_path/mirror: it answers
    404 for what it lacks, and does not answer range requests."""
    root = tmp_path / "mirror"
    root.mkdir()
    port = _closed_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory",
                               str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield root, f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.parametrize("mirror, host, what", [
    ("http://127.0.0.1:{port}", "127.0.0.1:{port}", "connection refused"),
    ("http://nonexistent.invalid", "nonexistent.invalid", "host name not resolved"),
])
@pytest.mark.parametrize("date", ["20261101", "latest"])
def test_an_unreachable_mirror_is_named_with_its_host(mirror, host, what, date, tmp_path):
    port = _closed_port()
    mirror, host = mirror.format(port=port), host.format(port=port)
    result = _canine("preprocess", "--dump", f"en:{date}", "--mirror", mirror, "--output", "out", cwd=tmp_path)
    assert result.returncode == 2
    message = _last_line(result)
    assert f": cannot reach {host}" in message and f"({what})" in message and "missing" not in message
    assert message.startswith(f"{mirror}/enwiki/{date}/") and f"give another --mirror (now {mirror})" in message
    assert result.stderr.count("\n") == 1  # a failure that comes at once is the one line
    assert not (tmp_path / "out").exists()


def test_an_http_mirror_that_answers_names_what_it_lacks_and_what_it_cannot_do(http_mirror, tmp_path):
    root, url = http_mirror
    result = _canine("preprocess", "--dump", "en:20261101", "--mirror", url, "--output", "out", cwd=tmp_path)
    assert result.returncode == 2
    assert _last_line(result).startswith(f"--dump en:20261101: missing on the mirror: {url}/enwiki/20261101/")
    folder = root / "enwiki" / "20261101"
    folder.mkdir(parents=True)
    _multistream((SAMPLE / "enwiki-20261101-pages-articles.xml").read_text(encoding="utf-8"), folder)
    result = _canine("preprocess", "--dump", "en:20261101", "--mirror", url, "--output", "out", *FAST, cwd=tmp_path)
    assert result.returncode == 2
    assert _last_line(result).startswith(f"{url}/enwiki/20261101/enwiki-20261101-pages-articles-multistream.xml.bz2: "
                                         "the server does not answer HTTP range requests")
    result = _canine("preprocess", f"{url}/enwiki/nope-pages-articles.xml", "--output", "out", cwd=tmp_path)
    assert _last_line(result).startswith(f"{url}/enwiki/nope-pages-articles.xml: input not found")


def test_an_input_url_on_a_closed_port_is_named(tmp_path):
    port = _closed_port()
    url = f"http://127.0.0.1:{port}/dumps/enwiki-20261101-pages-articles.xml.bz2"
    result = _canine("preprocess", url, "--output", "out", cwd=tmp_path)
    assert result.returncode == 2
    assert _last_line(result).startswith(f"{url}: cannot reach 127.0.0.1:{port} (connection refused)")
    assert result.stderr.count("\n") == 1


# --- DataflowRunner: what its workers cannot reach, and a launch without network -----------------
# Until `canine preprocess`'s driver calls pipeline.beam.runners.check_launch (before its runner check),
# Beam itself finds these by waiting: minutes of retries each. Skipped, not hung, while it does not.
dataflow_checked = pytest.mark.skipif(
    "runners.check_launch(" not in (ROOT / "pipeline" / "run.py").read_text(encoding="utf-8"),
    reason="pipeline/run.py does not call pipeline.beam.runners.check_launch yet")
DATAFLOW = ["--runner", "DataflowRunner", "--", "--project", "canine-test", "--region", "us-central1",
            "--temp_location", "gs://canine-test-bucket/tmp"]


@dataflow_checked
def test_dataflow_refuses_a_local_output(tmp_path):
    xml = SAMPLE / "kowiki-20261101-pages-articles.xml"
    result = _canine("preprocess", xml, "--output", "out/shards", *DATAFLOW, cwd=tmp_path, timeout=120)
    assert result.returncode == 2
    assert _last_line(result).startswith("--output out/shards: a path on this machine, which Dataflow's workers")
    result = _canine("preprocess", xml, "--output", "gs://canine-test-bucket/shards", *DATAFLOW, cwd=tmp_path, timeout=120)
    assert result.returncode == 2
    assert _last_line(result).startswith(f"{xml}: an input on this machine, which Dataflow's workers cannot read")
    assert not (tmp_path / "out").exists()


@dataflow_checked
@pytest.mark.parametrize("endpoint, storage, host, what", [
    ("http://127.0.0.1:{port}", None, "127.0.0.1:{port}", "connection refused): the Dataflow API"),
    ("https://nonexistent.invalid", None, "nonexistent.invalid:443", "host name not resolved): the Dataflow API"),
    ("http://127.0.0.1:{listening}", "http://127.0.0.1:{port}", "127.0.0.1:{port}", "connection refused): Cloud Storage"),
])
def test_a_dataflow_launch_without_network_is_named_in_seconds(endpoint, storage, host, what, tmp_path):
    """The endpoints a launch needs, each a real socket: the Dataflow API (--dataflow_endpoint) and
    Cloud Storage (STORAGE_EMULATOR_HOST, as google-cloud-storage reads it)."""
    port = _closed_port()
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen(8)
        fill = {"port": port, "listening": listening.getsockname()[1]}
        env = {"STORAGE_EMULATOR_HOST": storage.format(**fill)} if storage else {}
        url = "gs://canine-test-bucket/data/kowiki-20261101-pages-articles.xml"
        t = time.monotonic()
        result = _canine("preprocess", url, "--output", "gs://canine-test-bucket/shards", *DATAFLOW,
                         "--dataflow_endpoint", endpoint.format(**fill), cwd=tmp_path, env=env, timeout=120)
    assert result.returncode == 2
    assert _last_line(result).startswith(f"--runner DataflowRunner: cannot reach {host.format(**fill)} ({what}")
    assert time.monotonic() - t < 60  # Beam's staging retries would take about 10 minutes
