"""Wikimedia's dump naming, in one place: a dump named as `LANG:DATE`, its file URLs on a mirror,
the index beside any multistream dump, `latest` pinned to its date, and an output sub-path.

    canine preprocess --dump en:20261101 --output gs://bucket/shards
    canine preprocess --dump ja:latest --mirror /data/wikimedia --output out/shards
    canine preprocess --dump latest --lang ko --output out/shards

Wikimedia's layout (https://dumps.wikimedia.org, and every mirror that copies it):

    <mirror>/<lang>wiki/<date>/<lang>wiki-<date>-pages-articles-multistream.xml.bz2
    <mirror>/<lang>wiki/<date>/<lang>wiki-<date>-pages-articles-multistream-index.txt.bz2
    <mirror>/<lang>wiki/latest/<lang>wiki-latest-pages-articles-multistream.xml.bz2  (and -index)
    <mirror>/<lang>wiki/latest/<lang>wiki-latest-pages-articles-multistream.xml.bz2-rss.xml

and the same dump split into parts, `...-multistream3.xml-p1p99.bz2` beside
`...-multistream-index3.txt-p1p99.bz2`. The index (`offset:page_id:title`, ~100 pages per bz2
stream) is what lets Beam split a dump that bz2 alone cannot (docs/canine.md, "Training-stack
facts"): `index_of` names it from the dump's name, for a `--dump` here and for any multistream
input the pipeline plans (multistream.py). `parse_dump` is pure: nothing is contacted.
`pin_latest` and `missing_files` read the mirror, and only when called; `resolve_dumps` is the one
resolution of `canine preprocess --dump` (pipeline/run.py).

A mirror that cannot be reached is not a missing dump: "missing on the mirror" is said only when
the mirror answered that it has no such file; a refused connection, a host name that does not
resolve, a time-out or an HTTP error status is named as such, with the host (InputError, from
network.py). Each request to an HTTP(S) mirror waits at most network.TIMEOUT_S seconds to
connect and between reads, and a wait of more than a second says in the log what it waits for.
"""

import dataclasses
import datetime
import hashlib
import re
import xml.etree.ElementTree as ET

import fsspec

from contract.files import redact
from pipeline.sources import network

DEFAULT_MIRROR = "https://dumps.wikimedia.org"
LATEST = "latest"
_DUMP_SUFFIX = "pages-articles-multistream.xml.bz2"  # the content pages' current revisions, in bz2 streams
# A multistream dump, whole or a part (`multistream3.xml-p1p99.bz2`), and its index: the dump's
# name with `multistream` followed by `-index` and `.xml` by `.txt` (`multistream-index3.txt-p1p99.bz2`).
_MULTISTREAM_RE = re.compile(r"multistream(\d*)\.xml(-p\d+p\d+)?\.bz2$")
INDEX_RE = re.compile(r"multistream-index\d*\.txt(?:-p\d+p\d+)?\.bz2$")
_INDEX_NAME = r"multistream-index\1.txt\2.bz2"
# Wikipedia language codes: "en", "zh-min-nan", "be-tarask", "simple". The dump folders use the
# database name, where hyphens are underscores ("zh_min_nanwiki"), so both spellings are accepted
# and the underscore one is canonical: one output path, hence one lock, per wiki.
_LANG_RE = re.compile(r"^[a-z][a-z0-9]*(?:[-_][a-z0-9]+)*$")


class DumpNotFound(FileNotFoundError):
    """A dump, its index or its `latest` feed is not on the mirror; the message names the URLs
    and what to do (`canine preprocess` prints it as it is, jobs/errors.py)."""


@dataclasses.dataclass(frozen=True)
class Dump:
    lang: str  # canonical language code, underscores for hyphens ("en", "zh_min_nan")
    date: str  # "YYYYMMDD", or "latest" until pin_latest() resolves it
    mirror: str = DEFAULT_MIRROR  # fsspec URL or local path of the mirror root, no trailing slash

    @property
    def wiki(self) -> str:
        return f"{self.lang}wiki"

    @property
    def folder(self) -> str:
        """The dump's folder on the mirror."""
        return f"{self.mirror}/{self.wiki}/{self.date}"

    @property
    def dump_url(self) -> str:
        return f"{self.folder}/{self.wiki}-{self.date}-{_DUMP_SUFFIX}"

    @property
    def index_url(self) -> str:
        return index_of(self.dump_url)

    @property
    def output_subpath(self) -> str:
        """Where this dump's shards go under --output: `<lang>/<date>`."""
        return output_subpath([self])

    @property
    def latest_feed_url(self) -> str:
        """The RSS feed Wikimedia publishes beside each `latest` file; its <link> names the dated folder."""
        return f"{dataclasses.replace(self, date=LATEST).dump_url}-rss.xml"


def index_of(dump: str) -> str | None:
    """The index beside a multistream dump (a name, path or URL ending like one), or None for
    any other name."""
    if not _MULTISTREAM_RE.search(dump):
        return None
    return _MULTISTREAM_RE.sub(_INDEX_NAME, dump)


def parse_dump(spec: str, *, mirror: str | None = None, lang: str | None = None) -> Dump:
    """`"en:20261101"`, `"en:latest"`, or `"latest"` (then `lang`, from --lang, names the wiki).

    Raises ValueError naming the bad part of `spec`. Pure: the mirror is not contacted.
    """
    text = spec.strip()
    if ":" in text:
        code, _, date = text.partition(":")
        if lang is not None and _canonical_lang(lang, "--lang") != _canonical_lang(code, f"--dump {spec!r}"):
            raise ValueError(f"--dump {spec!r} names language {code!r} but --lang is {lang!r}")
    elif text == LATEST:
        if lang is None:
            raise ValueError("--dump latest needs a language: write LANG:latest (e.g. en:latest) or add --lang")
        code, date = lang, LATEST
    else:
        raise ValueError(f"--dump {spec!r}: expected LANG:DATE (e.g. en:20261101), LANG:latest, or latest")
    return Dump(_canonical_lang(code, f"--dump {spec!r}"), _check_date(date, spec), _mirror_root(mirror))


def pin_latest(dump: Dump) -> Dump:
    """Resolve `latest` to the dated dump it points at, by reading the mirror's RSS feed.

    Why pin: `latest/` is re-pointed each month, so a run of several hours that reads `latest/`
    can see the index of one dump and the pages of the next; dated files never change. And a
    scheduled run keyed by the real date writes a new output folder per dump instead of
    overwriting `<lang>/latest`. A dated Dump is returned unchanged.
    """
    if dump.date != LATEST:
        return dump
    url = dump.latest_feed_url
    fs, path = _mirror_fs(url)
    try:
        with _waiting(url, f"the feed of {dump.wiki} latest"), fs.open(path, "rb") as f:
            feed = f.read()
    except OSError as e:  # fsspec's HTTP filesystem: FileNotFoundError for a refused connection too
        _raise_if_unreachable(url, e, f"reading the feed of {dump.wiki} latest", dump)
        if not isinstance(e, FileNotFoundError):
            raise
        raise DumpNotFound(
            f"{url}: no feed for {dump.wiki} latest on this mirror; name the date instead "
            f"(--dump {dump.lang}:YYYYMMDD), or check --mirror ({dump.mirror})") from None
    try:
        links = [el.text or "" for el in ET.fromstring(feed).iter("link")]
    except ET.ParseError as e:
        raise ValueError(f"{url}: not an RSS feed ({e})") from None
    # The channel <link> points at .../latest; the item <link> at the dated folder .../<wiki>/<date>.
    dates = {m.group(1) for link in links if (m := re.search(rf"/{re.escape(dump.wiki)}/(\d{{8}})/?$", link.strip()))}
    if len(dates) != 1:
        raise ValueError(f"{url}: expected one <link> to a dated {dump.wiki} folder, found {sorted(dates) or 'none'}")
    return dataclasses.replace(dump, date=_check_date(dates.pop(), url))


def missing_files(dump: Dump, timeout_s: float | None = None) -> list[str]:
    """The dump and index URLs that the mirror does not have (empty when both exist). Raises
    InputError naming the host and what failed when the mirror cannot be reached; `timeout_s`
    bounds each wait on an HTTP(S) mirror (network.TIMEOUT_S)."""
    missing = []
    for url in (dump.dump_url, dump.index_url):
        fs, path = _mirror_fs(url, timeout_s)
        with _waiting(url, url.rsplit("/", 1)[-1], timeout_s):
            found = network.exists(fs, path, url, "checking the mirror for it", _todo(dump), timeout_s)
        if not found:
            missing.append(url)
    return missing


def _http(url: str) -> bool:
    return url.split("://", 1)[0] in ("http", "https")


def _mirror_fs(url: str, timeout_s: float | None = None):
    """The filesystem and path of a mirror URL; on HTTP(S) with each wait bounded (to connect, and
    between reads): aiohttp's default waits up to 5 minutes a request."""
    if not _http(url):
        return fsspec.core.url_to_fs(url)
    import aiohttp

    t = network.TIMEOUT_S if timeout_s is None else timeout_s
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=t, sock_read=t)
    return fsspec.core.url_to_fs(url, client_kwargs={"timeout": timeout})


def _waiting(url: str, what: str, timeout_s: float | None = None):
    """Says, once a wait on the mirror passes network.NOTICE_S, what it waits for."""
    timeout_s = network.TIMEOUT_S if timeout_s is None else timeout_s
    return network.waiting(f"{redact(network.where(None, url))} to send {what}", timeout_s)


def _raise_if_unreachable(url: str, error: BaseException, doing: str, dump: Dump) -> None:
    if (unreachable := network.unreachable(url, error, doing, _todo(dump))):
        raise unreachable from None


def _todo(dump: Dump) -> str:
    return f"check the network, or give another --mirror (now {dump.mirror})"


def output_subpath(dumps: list[Dump]) -> str:
    """The output sub-path of a run over these dumps, keyed by language and date.

    `<langs>/<date>`: the languages sorted and joined by "-" (codes never contain one once
    canonical), and the newest date, or "latest" if any dump is unpinned. One dump: `en/20261101`;
    a multilingual run, whose languages are smoothed together (share^alpha) and so belong in one
    output: `en-ja-ko/20261101`. More than 16 languages (mBERT's 104) become
    `<n>langs-<hash>`: a path component must stay under 255 bytes; the manifest lists them all.
    """
    if not dumps:
        raise ValueError("no dumps given")
    langs = sorted({d.lang for d in dumps})
    if len(langs) != len(dumps):
        raise ValueError(f"a language is named twice in {[f'{d.lang}:{d.date}' for d in dumps]}")
    key = "-".join(langs)
    if len(langs) > 16:
        key = f"{len(langs)}langs-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    dates = {d.date for d in dumps}
    return f"{key}/{LATEST if LATEST in dates else max(dates)}"


def output_path(output: str, dumps: Dump | list[Dump]) -> str:
    """`--output` joined with the sub-path of one dump or of a run's dumps."""
    dumps = [dumps] if isinstance(dumps, Dump) else dumps
    return f"{output.rstrip('/')}/{output_subpath(dumps)}"


def _canonical_lang(code: str, where: str) -> str:
    code = code.strip().lower()
    if not _LANG_RE.match(code):
        raise ValueError(f"{where}: {code!r} is not a Wikipedia language code (e.g. en, ja, zh-min-nan)")
    return code.replace("-", "_")


def _check_date(date: str, where: str) -> str:
    date = date.strip()
    if date == LATEST:
        return date
    try:
        if len(date) != 8:
            raise ValueError
        datetime.datetime.strptime(date, "%Y%m%d")
    except ValueError:
        raise ValueError(f"{where}: dump date {date!r} is not YYYYMMDD (e.g. 20261101) or 'latest'") from None
    return date


def _mirror_root(mirror: str | None) -> str:
    root = (mirror or DEFAULT_MIRROR).strip()
    if not root:
        raise ValueError("--mirror is empty")
    return root.rstrip("/") or "/"


def resolve_dumps(specs: list[str], *, mirror: str | None = None, lang: str | None = None) -> list[Dump]:
    """`--dump` specs as dumps that exist: `latest` pinned to its date (the output path then names
    the real date, so reruns find it), every dump and its index checked on the mirror. Raises
    ValueError naming a bad spec, DumpNotFound naming what the mirror lacks. The one
    resolution `canine preprocess --dump` (the CLI, the smoke run, the scheduled script) goes through."""
    resolved = []
    for spec in specs:
        d = pin_latest(parse_dump(spec, mirror=mirror, lang=lang))
        missing = missing_files(d)
        if missing:
            raise DumpNotFound(f"--dump {spec}: missing on the mirror: {', '.join(missing)}; check the language and "
                               f"the date ({d.mirror}/{d.wiki}/ lists the dated dumps) or --mirror")
        resolved.append(d)
    # In language order, as the output path: "ko en" and "en ko" are one run with one config.
    return sorted(resolved, key=lambda d: d.lang)
