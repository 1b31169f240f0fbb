"""Wikimedia's dump naming (pipeline/sources/dumps.py): `--dump LANG:DATE` as URLs in Wikimedia's
layout, output keyed by language and date, `latest` pinned from a local mirror's feed, a mirror
that cannot be reached named as such, and the index the pipeline finds beside a multistream dump
(a split part's too) by the same names. No network beyond 127.0.0.1: the mirror is a temp
directory, or a socket on the loopback."""

import bz2
import re
import socket
import time
from pathlib import Path

import pytest

from pipeline.sources import dumps

SAMPLE_DIR = Path(__file__).resolve().parents[3] / "pipeline" / "sample"

FEED = """<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0"><channel><title>Wikimedia Downloads</title>
<link>https://dumps.wikimedia.org/{wiki}/latest</link>
<description>{wiki} dump updates</description>
<item><title>{wiki}-latest-pages-articles-multistream.xml.bz2</title>
<link>https://dumps.wikimedia.org/{wiki}/{date}</link>
<description>&lt;a href="https://dumps.wikimedia.org/{wiki}/{date}/x.bz2"&gt;</description></item>
</channel></rss>
"""


def test_dated_dump_urls_follow_wikimedia_layout():
    d = dumps.parse_dump("en:20261101")
    assert d.dump_url == ("https://dumps.wikimedia.org/enwiki/20261101/"
                          "enwiki-20261101-pages-articles-multistream.xml.bz2")
    assert d.index_url == ("https://dumps.wikimedia.org/enwiki/20261101/"
                           "enwiki-20261101-pages-articles-multistream-index.txt.bz2")
    assert d.output_subpath == "en/20261101"
    assert dumps.output_path("gs://b/shards/", d) == "gs://b/shards/en/20261101"


def test_latest_uses_the_latest_folder_and_lang_flag():
    d = dumps.parse_dump("latest", lang="ja", mirror="/srv/mirror/")
    assert d == dumps.Dump("ja", "latest", "/srv/mirror")
    assert d.dump_url == "/srv/mirror/jawiki/latest/jawiki-latest-pages-articles-multistream.xml.bz2"
    assert d.index_url == "/srv/mirror/jawiki/latest/jawiki-latest-pages-articles-multistream-index.txt.bz2"
    assert dumps.parse_dump("ja:latest", mirror="/srv/mirror") == d


def test_hyphenated_codes_map_to_the_wiki_database_name():
    a, b = dumps.parse_dump("zh-min-nan:20261101"), dumps.parse_dump("zh_min_nan:20261101")
    assert a == b  # one output path, hence one lock, whichever spelling a run used
    assert a.dump_url.split("/")[-3:-1] == ["zh_min_nanwiki", "20261101"]


@pytest.mark.parametrize("spec, lang, needle", [
    ("en", None, "expected LANG:DATE"),
    ("latest", None, "needs a language"),
    ("en:2026-11-01", None, "'2026-11-01' is not YYYYMMDD"),
    ("en:20261341", None, "'20261341' is not YYYYMMDD"),
    ("EN wiki:20261101", None, "not a Wikipedia language code"),
    ("en:20261101", "ja", "names language 'en' but --lang is 'ja'"),
])
def test_bad_specs_name_the_problem(spec, lang, needle):
    with pytest.raises(ValueError) as e:
        dumps.parse_dump(spec, lang=lang)
    assert needle in str(e.value)


def test_pin_latest_reads_the_mirrors_feed(tmp_path):
    latest = tmp_path / "kowiki" / "latest"
    latest.mkdir(parents=True)
    (latest / "kowiki-latest-pages-articles-multistream.xml.bz2-rss.xml").write_text(FEED.format(wiki="kowiki", date="20261020"))
    pinned = dumps.pin_latest(dumps.parse_dump("ko:latest", mirror=str(tmp_path)))
    assert (pinned.date, pinned.output_subpath) == ("20261020", "ko/20261020")
    assert pinned.dump_url.endswith("/kowiki/20261020/kowiki-20261020-pages-articles-multistream.xml.bz2")
    dated = dumps.parse_dump("ko:20260901", mirror=str(tmp_path))
    assert dumps.pin_latest(dated) is dated  # nothing to resolve, nothing read


def test_pin_latest_errors_name_the_feed(tmp_path):
    d = dumps.parse_dump("fi:latest", mirror=str(tmp_path))
    with pytest.raises(FileNotFoundError) as e:
        dumps.pin_latest(d)
    assert d.latest_feed_url in str(e.value) and "--dump fi:YYYYMMDD" in str(e.value)
    feed = tmp_path / "fiwiki" / "latest" / "fiwiki-latest-pages-articles-multistream.xml.bz2-rss.xml"
    feed.parent.mkdir(parents=True)
    feed.write_text("<rss><channel><link>https://dumps.wikimedia.org/fiwiki/latest</link></channel></rss>")
    with pytest.raises(ValueError, match="found none"):
        dumps.pin_latest(d)
    feed.write_text("<rss><unclosed>")
    with pytest.raises(ValueError, match="not an RSS feed"):
        dumps.pin_latest(d)


def test_missing_files_checks_the_mirror(tmp_path):
    d = dumps.parse_dump("en:20261101", mirror=f"file://{tmp_path}")
    assert dumps.missing_files(d) == [d.dump_url, d.index_url]
    folder = tmp_path / "enwiki" / "20261101"
    folder.mkdir(parents=True)
    (folder / "enwiki-20261101-pages-articles-multistream.xml.bz2").write_bytes(bz2.compress(b"<mediawiki/>"))
    assert dumps.missing_files(d) == [d.index_url]
    (folder / "enwiki-20261101-pages-articles-multistream-index.txt.bz2").write_bytes(bz2.compress(b"0:1:A\n"))
    assert dumps.missing_files(d) == []


def test_the_pipeline_finds_the_index_beside_a_named_dump(tmp_path, make_multistream):
    """The names agree with pipeline/sources/multistream.py: it finds the index and splits the dump by stream."""
    from pipeline.sources import plan_work_items, read_pages

    sample_dir = SAMPLE_DIR
    d = dumps.parse_dump("en:20261101", mirror=str(tmp_path))
    dump, index = make_multistream(sample_dir / "enwiki-20261101-pages-articles.xml", tmp_path / "enwiki" / "20261101")
    assert (str(dump), str(index)) == (d.dump_url, d.index_url) and dumps.missing_files(d) == []
    items = plan_work_items([d.dump_url], streams_per_item=1)
    assert len(items) > 1 and all(it.lang == "en" for it in items)  # split at the index's stream offsets
    whole = [p.title for p in read_pages(plan_work_items([str(sample_dir / "enwiki-20261101-pages-articles.xml")])[0])]
    assert [p.title for it in items for p in read_pages(it)] == whole


def test_a_split_parts_index_is_named_by_the_same_rule(tmp_path, make_multistream):
    """Wikimedia's dumps in parts (`...-multistream3.xml-p1p99.bz2`): the index of each part is its
    name with `-index` and `.txt`; the planner splits the part by it and takes the index for no input."""
    from pipeline.sources import plan_work_items

    d = dumps.parse_dump("en:20261101")
    assert dumps.index_of(d.dump_url) == d.index_url
    part = "enwiki-20261101-pages-articles-multistream3.xml-p1p41242.bz2"
    assert dumps.index_of(f"gs://b/{part}") == "gs://b/enwiki-20261101-pages-articles-multistream-index3.txt-p1p41242.bz2"
    assert dumps.INDEX_RE.search(dumps.index_of(part)) and not dumps.INDEX_RE.search(part)
    for other in ("enwiki-20261101-pages-articles.xml.bz2", "x-multistream.xml", part + ".gz"):
        assert dumps.index_of(other) is None
    whole, whole_index = make_multistream(SAMPLE_DIR / "enwiki-20261101-pages-articles.xml", tmp_path / "whole")
    parts = tmp_path / "parts"
    parts.mkdir()
    dump = parts / part
    dump.write_bytes(whole.read_bytes())
    (parts / dumps.index_of(part)).write_bytes(whole_index.read_bytes())
    items = plan_work_items([str(parts / "*")], streams_per_item=1)
    assert len(items) > 1 and {it.path for it in items} == {str(dump)}  # split at its index, not read as input


def test_output_subpath_of_a_multilingual_run():
    en, ja = dumps.parse_dump("en:20261101"), dumps.parse_dump("ja:20261020")
    assert dumps.output_subpath([ja, en]) == "en-ja/20261101"  # sorted languages, newest date
    assert dumps.output_subpath([en, dumps.parse_dump("ko:latest")]) == "en-ko/latest"
    assert dumps.output_path("out/", [en, ja]) == "out/en-ja/20261101"
    many = [dumps.parse_dump(f"l{i}:20261101") for i in range(20)]
    key, date = dumps.output_subpath(many).split("/")
    assert re.fullmatch(r"20langs-[0-9a-f]{12}", key) and date == "20261101"
    with pytest.raises(ValueError, match="named twice"):
        dumps.output_subpath([en, dumps.parse_dump("en:20261020")])


def test_resolve_dumps_pins_latest_and_checks_the_mirror(tmp_path):
    """The one dump resolution (`canine preprocess --dump`, hence the CLI, smoke and the scheduled script)."""
    latest = tmp_path / "kowiki" / "latest"
    latest.mkdir(parents=True)
    (latest / "kowiki-latest-pages-articles-multistream.xml.bz2-rss.xml").write_text(FEED.format(wiki="kowiki", date="20261101"))
    with pytest.raises(FileNotFoundError, match="--dump ko:latest: missing on the mirror: .*/kowiki/20261101/kowiki-20261101-"):
        dumps.resolve_dumps(["ko:latest"], mirror=str(tmp_path))
    for name in ("pages-articles-multistream.xml.bz2", "pages-articles-multistream-index.txt.bz2"):
        (tmp_path / "kowiki" / "20261101" / f"kowiki-20261101-{name}").parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "kowiki" / "20261101" / f"kowiki-20261101-{name}").write_bytes(b"")
    (ko,) = dumps.resolve_dumps(["ko:latest"], mirror=str(tmp_path))
    assert ko.date == "20261101" and dumps.output_path("out", [ko]) == "out/ko/20261101"


# --- a mirror that cannot be reached is not a missing dump ----------------------------------------
# Real sockets on 127.0.0.1: a closed port, and one that accepts and never answers; a host name
# that cannot resolve (`.invalid`, RFC 6761). What a dump's absence looks like on an HTTP mirror
# that answers: tests/jobs/test_inputs_cli.py.


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("mirror, where, what", [
    ("http://127.0.0.1:{port}", "127.0.0.1:{port}", "connection refused"),
    ("http://nonexistent.invalid", "nonexistent.invalid", "host name not resolved"),
])
def test_an_unreachable_mirror_is_named_not_missing(mirror, where, what):
    from pipeline.sources import InputError

    port = _closed_port()
    mirror, where = mirror.format(port=port), where.format(port=port)
    d = dumps.parse_dump("en:20261101", mirror=mirror)
    with pytest.raises(InputError) as e:
        dumps.missing_files(d)
    assert not isinstance(e.value, FileNotFoundError)
    assert str(e.value).startswith(f"{d.dump_url}: cannot reach {where}") and f"({what})" in str(e.value)
    assert f"give another --mirror (now {mirror})" in str(e.value) and "missing" not in str(e.value)
    with pytest.raises(InputError, match=rf"^{re.escape(dumps.parse_dump('en:latest', mirror=mirror).latest_feed_url)}: "
                                         rf"cannot reach {re.escape(where)}.*\({what}\) while reading the feed of enwiki latest"):
        dumps.resolve_dumps(["en:latest"], mirror=mirror)


def test_a_mirror_that_does_not_answer_times_out_saying_what_it_waited_for(caplog):
    """A server that accepts the connection and says nothing: each wait ends after timeout_s, and
    one longer than network.NOTICE_S says what it waits for."""
    from pipeline.sources import InputError, network

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        d = dumps.parse_dump("en:20261101", mirror=f"http://127.0.0.1:{port}")
        t = time.monotonic()
        with caplog.at_level("INFO", logger="pipeline.sources.network"), \
                pytest.raises(InputError, match=rf"cannot reach 127\.0\.0\.1:{port} \(timed out\) while checking the mirror"):
            dumps.missing_files(d, timeout_s=network.NOTICE_S + 0.5)
        assert time.monotonic() - t < 15  # aiohttp's own default would wait 5 minutes
    assert f"waiting for 127.0.0.1:{port} to send enwiki-20261101-pages-articles-multistream.xml.bz2 (up to 2 s)" \
        in caplog.messages
