"""Fixtures for pipeline tests: the bundled sample, and every input kind built from it; synthetic shards.

Helpers are handed out as fixtures (pytest's way of sharing code between test files, since
tests/ is not a package); each returns the plain function below:
    make_multistream(xml, out_dir, pages_per_stream=10) -> (dump, index)   real bz2 multistream
    compress(src, dst)                 .bz2 / .gz by dst's suffix (one stream)
    write_rows(rows, path)             .jsonl / .jsonl.gz / .parquet by suffix
    pages_as_rows(pages, cleaned=True) RawPages -> {id, title, text, lang} rows (kept pages
                                       with cleaned text, or every well-formed page raw)
    make_synthetic_dump(path, n_pages) a dump of n pages (sample pages with fresh ids),
                                       written streaming, .xml / .xml.bz2 / .xml.gz
Session data:
    contract_shards a shard directory as `canine preprocess` writes it, from synthetic multilingual
                    text (pipeline/synthetic.py `write_contract_shards`, which the benchmarks use too)
    sample_xml      {lang: Path} of the bundled dumps
    sample_pages    {lang: [RawPage]} read with pipeline.sources.read_pages
    real_pages      {file name: [RawPage]} of the real Wikipedia excerpts in tests/data/wiki (its README)
    input_variants  {kind: path} of the English sample as every kind: xml, xml_bz2, xml_gz,
                    multistream (its index beside it), jsonl, jsonl_gz, parquet (cleaned text)
    bad_inputs      {name: path}: truncated_bz2, corrupt_gz, malformed_xml, truncated_xml,
                    stale_index (an index whose offsets miss the stream starts)
Object stores, real protocol servers started as separate processes on 127.0.0.1 (loopback/stores.py):
    s3_store        moto's S3 server; sets AWS_* in os.environ for the session; .url(name) gives
                    a fresh s3://bucket/name URL
    gcs_store       gcp-storage-emulator; sets STORAGE_EMULATOR_HOST; .url(name) -> gs://...
MLflow:
    mlflow_server   a real `mlflow server` on 127.0.0.1 for the session: its http:// URL
Compiled kernels: TORCHINDUCTOR_CACHE_DIR, unless set, is a folder per CPU setting (inductor_cache_dir
below; docs/compile.md "The kernel cache and CPU settings").
"""

import bz2
import functools
import getpass
import gzip
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from xml.sax.saxutils import unescape

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from loopback import stores
from pipeline.wikitext.clean import clean_page
from pipeline.sources import WorkItem, read_pages
from pipeline.synthetic import write_contract_shards

# Ray Train V2's controller polls its workers every RAY_TRAIN_HEALTH_CHECK_INTERVAL_S (2 s by
# default): a run's start and its end each wait for a poll. Every cluster the tests start (in
# process or as subprocesses) inherits this: measured on a 12-step tiny run, 9.5 -> 8.1 s from
# the driver's fit() to the workers' loop and 3.3 -> 0.7 s from their end to fit()'s return, so
# ~4 s of each of the suite's ~20 Ray Train starts. Failure detection only gets faster.
os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.25")

# --- compiled kernels, a folder per CPU setting ---------------------------------------------------
# Inductor caches what it compiles in TORCHINDUCTOR_CACHE_DIR (by default one folder per user under
# the temp dir), and what it finds there does not depend on the CPU capability ATen runs with:
# tests/training/test_compile.py under ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2
# MKL_ENABLE_INSTRUCTIONS=AVX2, then without them on one cache, segfaulted in libc10.so at the first
# compiled test (a fresh cache passes). So each setting gets a folder of its own, unless the user
# named one. Set once the test modules are imported: finding the capability needs torch, a 2-5 s
# import that a run without a torch test does not pay (and compiles nothing).
ISA_VARIABLES = {"ONEDNN_MAX_CPU_ISA": "onednn", "DNNL_MAX_CPU_ISA": "dnnl", "MKL_ENABLE_INSTRUCTIONS": "mkl"}
_USER_INDUCTOR_CACHE = os.environ.get("TORCHINDUCTOR_CACHE_DIR")  # before anything imports torch


def inductor_cache_key() -> str:
    """The CPU setting compiled kernels belong to: ATen's effective capability (ATEN_CPU_CAPABILITY
    or what the CPU has) and the ISA limits given to oneDNN and MKL, e.g. `aten-avx2_onednn-avx2_mkl-avx2`."""
    import torch

    parts = [f"aten-{torch.backends.cpu.get_cpu_capability()}"]
    parts += [f"{short}-{os.environ[name]}" for name, short in ISA_VARIABLES.items() if os.environ.get(name)]
    return re.sub(r"[^a-z0-9._-]+", ".", "_".join(parts).lower())


def inductor_cache_dir() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container's)
        user = f"uid{os.getuid()}"
    return os.path.join(tempfile.gettempdir(), f"canine-inductor-{user}", inductor_cache_key())


def pytest_collection_finish(session):
    """Before any test runs, and before any Ray cluster or subprocess inherits the environment."""
    if _USER_INDUCTOR_CACHE is None and "torch" in sys.modules:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = inductor_cache_dir()


SAMPLE_DIR = Path(__file__).resolve().parents[1] / "pipeline" / "sample"
REAL_DIR = Path(__file__).resolve().parent / "data" / "wiki"
_PAGE_RE = re.compile(r"  <page>\n.*?</page>\n", re.S)


def split_dump(xml: str) -> tuple[str, list[str], str]:
    """(header up to </siteinfo>, one string per <page> element, footer) of a sample dump."""
    pages = _PAGE_RE.findall(xml)
    first, last = xml.index(pages[0]), xml.rindex(pages[-1]) + len(pages[-1])
    return xml[:first], pages, xml[last:]


def make_multistream(xml_path, out_dir, pages_per_stream: int = 10) -> tuple[Path, Path]:
    """Wikimedia's layout: a header stream, `pages_per_stream` pages a stream, a footer stream,
    and an index of `offset:page_id:title` lines naming each page's stream."""
    xml_path, out_dir = Path(xml_path), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = xml_path.name.removesuffix("-pages-articles.xml")
    dump = out_dir / f"{stem}-pages-articles-multistream.xml.bz2"
    index = out_dir / f"{stem}-pages-articles-multistream-index.txt.bz2"
    header, pages, footer = split_dump(xml_path.read_text(encoding="utf-8"))
    lines, offset = [], 0
    with open(dump, "wb") as f:
        offset += f.write(bz2.compress(header.encode()))
        for i in range(0, len(pages), pages_per_stream):
            group = pages[i : i + pages_per_stream]
            for page in group:
                page_id = re.search(r"<id>(.*?)</id>", page).group(1)
                title = unescape(re.search(r"<title>(.*?)</title>", page).group(1))
                lines.append(f"{offset}:{page_id}:{title}\n")
            offset += f.write(bz2.compress("".join(group).encode()))
        f.write(bz2.compress(footer.encode()))
    index.write_bytes(bz2.compress("".join(lines).encode()))
    return dump, index


def compress(src, dst) -> Path:
    opener = bz2.open if str(dst).endswith(".bz2") else gzip.open
    with open(src, "rb") as f, opener(dst, "wb") as out:
        out.write(f.read())
    return Path(dst)


def write_rows(rows: list[dict], path) -> Path:
    path = Path(path)
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        data = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()
        path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)
    return path


def pages_as_rows(pages, cleaned: bool = True) -> list[dict]:
    rows = []
    for page in pages:
        if page.error is not None:
            continue
        text = page.text
        if cleaned:
            result = clean_page(page)
            if result.outcome != "kept":
                continue
            text = result.text
        rows.append({"id": page.page_id, "title": page.title, "text": text, "lang": page.lang})
    return rows


def make_synthetic_dump(path, n_pages: int) -> Path:
    """n_pages article pages cycled from the English sample, ids 1..n, streamed to disk."""
    header, pages, footer = split_dump((SAMPLE_DIR / "enwiki-20261101-pages-articles.xml").read_text(encoding="utf-8"))
    pages = [p for p in pages if "<ns>0</ns>" in p and re.search(r"<id>\d+</id>", p)]
    path = Path(path)
    opener = bz2.open if path.suffix == ".bz2" else gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as f:
        f.write(header)
        for i in range(n_pages):
            f.write(re.sub(r"<id>\d+</id>", f"<id>{i + 1}</id>", pages[i % len(pages)], count=1))
        f.write(footer)
    return path


@pytest.fixture
def sigint_raises():
    """Python's own SIGINT handler (KeyboardInterrupt) for a test that sends SIGINT to its own main
    thread: a pytest started in the background by a non-interactive shell inherits SIGINT ignored,
    and Python then installs no handler, so the signal would be lost."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="session")
def sample_xml() -> dict[str, Path]:
    return {p.name.split("wiki-")[0]: p for p in sorted(SAMPLE_DIR.glob("*wiki-*-pages-articles.xml"))}


@pytest.fixture(scope="session")
def sample_pages(sample_xml) -> dict:
    return {lang: list(read_pages(WorkItem(str(p), "xml", lang=lang))) for lang, p in sample_xml.items()}


@pytest.fixture(scope="session")
def real_pages() -> dict:
    return {p.name: list(read_pages(WorkItem(str(p), "xml"))) for p in sorted(REAL_DIR.glob("*.xml.bz2"))}


@pytest.fixture(scope="session")
def input_variants(sample_xml, sample_pages, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("inputs")
    xml = sample_xml["en"]
    rows = pages_as_rows(sample_pages["en"])
    dump, _ = make_multistream(xml, out / "multistream", pages_per_stream=5)
    return {
        "xml": xml,
        "xml_bz2": compress(xml, out / "enwiki-20261101-pages-articles.xml.bz2"),
        "xml_gz": compress(xml, out / "enwiki-20261101-pages-articles.xml.gz"),
        "multistream": dump,
        "jsonl": write_rows(rows, out / "en-clean.jsonl"),
        "jsonl_gz": write_rows(rows, out / "en-clean.jsonl.gz"),
        "parquet": write_rows(rows, out / "en-clean.parquet"),
    }


@pytest.fixture(scope="session")
def bad_inputs(sample_xml, input_variants, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("bad")
    data = input_variants["multistream"].read_bytes()
    truncated_bz2 = out / "truncated" / "enwiki-20261101-pages-articles.xml.bz2"
    truncated_bz2.parent.mkdir()
    truncated_bz2.write_bytes(data[: len(data) * 2 // 3])  # cut inside a stream, index not copied

    gz = bytearray(input_variants["xml_gz"].read_bytes())
    gz[len(gz) // 2 : len(gz) // 2 + 64] = bytes(64)  # zeroed block in the middle of the deflate data
    corrupt_gz = out / "enwiki-20261101-pages-articles.xml.gz"
    corrupt_gz.write_bytes(bytes(gz))

    text = sample_xml["en"].read_text(encoding="utf-8")
    fifth_title = [m.end() for m in re.finditer("</title>", text)][4]
    malformed = out / "malformed" / "enwiki-20261101-pages-articles.xml"
    malformed.parent.mkdir()
    malformed.write_text(text[: fifth_title - 8] + "</titel>" + text[fifth_title:], encoding="utf-8")
    truncated_xml = out / "truncated_xml" / "enwiki-20261101-pages-articles.xml"
    truncated_xml.parent.mkdir()
    truncated_xml.write_text(text[: len(text) // 2], encoding="utf-8")

    stale = out / "stale"
    dump, index = make_multistream(sample_xml["en"], stale, pages_per_stream=5)
    lines = bz2.decompress(index.read_bytes()).decode().splitlines(keepends=True)
    index.write_bytes(bz2.compress("".join(f"{int(l.split(':')[0]) + 7}:{l.split(':', 1)[1]}" for l in lines).encode()))
    return {
        "truncated_bz2": truncated_bz2,
        "corrupt_gz": corrupt_gz,
        "malformed_xml": malformed,
        "truncated_xml": truncated_xml,
        "stale_index": dump,
    }


def _as_fixture(helper):
    """Hand a helper out as a session fixture of its own name."""
    return pytest.fixture(name=helper.__name__, scope="session")(lambda: helper)


_make_multistream_fixture = _as_fixture(make_multistream)
_compress_fixture = _as_fixture(compress)
_write_rows_fixture = _as_fixture(write_rows)
_pages_as_rows_fixture = _as_fixture(pages_as_rows)
_make_synthetic_dump_fixture = _as_fixture(make_synthetic_dump)


@pytest.fixture(scope="session")
def contract_shards(tmp_path_factory) -> str:
    """A contract-valid shard directory (see the module docstring); returns its path."""
    return write_contract_shards(str(tmp_path_factory.mktemp("shards")))


# --- object stores (loopback/stores.py starts the servers) ----------------------------------------


def _store(tmp_path_factory, protocol):
    import fsspec

    proc, env = stores.start(protocol, tmp_path_factory.mktemp(protocol) / "server.log")
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        store = stores.Store(protocol, f"canine-{uuid.uuid4().hex[:8]}", env)
        fsspec.filesystem(protocol, skip_instance_cache=True).mkdir(store.bucket)
        yield store
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="session")
def s3_store(tmp_path_factory):
    yield from _store(tmp_path_factory, "s3")


@pytest.fixture(scope="session")
def gcs_store(tmp_path_factory):
    yield from _store(tmp_path_factory, "gs")


# --- MLflow -------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory):
    """A real `mlflow server` (SQLite backend, local artifact root) bound to 127.0.0.1: its URL.
    One for the session: its start (the server's imports and its database's migrations) took
    ~60 s on the shared 2-core machine, and the tests that use it find their runs by id. Without
    MLflow's job execution (GenAI jobs and periodic tasks, nothing tracking uses), which starts a
    job runner and 7 huey consumers that stay alive, ~10% of a core between them while idle."""
    root = tmp_path_factory.mktemp("mlflow-server")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mlflow_cli = os.path.join(os.path.dirname(sys.executable), "mlflow")
    proc = subprocess.Popen([mlflow_cli, "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
                             "--backend-store-uri", f"sqlite:///{root}/db.sqlite",
                             "--default-artifact-root", str(root / "artifacts")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=root,
                            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    url, deadline = f"http://127.0.0.1:{port}", time.time() + 120
    try:
        while True:
            try:
                if urllib.request.urlopen(f"{url}/health", timeout=2).read() == b"OK":
                    break
            except OSError:
                pass
            assert proc.poll() is None and time.time() < deadline, "mlflow server did not start"
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


# --- the fast lane (make test-fast: -m "not slow") ----------------------------------------------
# A test that starts a Ray cluster or runs the Beam job end to end through one of these fixtures is
# `slow` whatever its file says, so the fast lane cannot pick one up by accident.
SLOW_FIXTURES = {"ray_local", "pipeline_shards", "reference_run", "head",  # head: tests/jobs/test_submit.py's Ray head
                 "tracked_run"}  # tests/jobs/conftest.py's canine pretrain


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    if _parallel(config):  # stable: the Ray group first, in its order
        items.sort(key=lambda item: shared_group(_file(item.nodeid)) != "ray_local")


# --- two test processes (make test: pytest-xdist, -n 2 --dist loadfile) -------------------------
# Each xdist worker is a session of its own: session fixtures are made once per worker that uses
# them. So a test file goes to one worker whole (its module fixtures made once), and the files that
# name a costly session fixture go to one worker together: the in-process Ray cluster with the
# pipeline's shards and the reference run compared against (tests/training/conftest.py; ~1100 s of
# tests, sent first so that they do not end the run alone), and the MLflow server (~60 s to start).
# The controller collects nothing and sees test ids alone, hence a file's group is read from its
# text. A worker then runs other files with that cluster still up, and an in-process `canine smoke`
# or `pretrain` would train on it instead of starting its own (as a serial run that puts
# tests/training before tests/jobs does): leaving the group, the worker stops it. (xdist's own
# loadgroup names a test's group in its id, which pytest 9's structured ids no longer take.)
SHARED_FIXTURES = (("ray_local", ("ray_local", "reference_run", "pipeline_shards")),
                   ("mlflow", ("mlflow_server", "tracked_run")))
ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def shared_group(path: str) -> str:
    """The group of the test file at `path` (relative to the root): the first of SHARED_FIXTURES
    whose fixtures it names, or ''."""
    text = (ROOT / path).read_text(encoding="utf-8")
    return next((name for name, fixtures in SHARED_FIXTURES
                 if any(re.search(rf"\b{f}\b", text) for f in fixtures)), "")


def _file(nodeid: str) -> str:
    return nodeid.split("::")[0]


@pytest.hookimpl(optionalhook=True)  # a run without pytest-xdist installed has no such hook
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        """loadscope's scheduling with a file, or its shared group, as the unit."""

        def _split_scope(self, nodeid: str) -> str:
            return shared_group(_file(nodeid)) or _file(nodeid)

    return SharedFixtureScheduling(config, log)


def _parallel(config) -> bool:
    """In an xdist worker (a worker's own config says dist "no")."""
    return hasattr(config, "workerinput")


def pytest_runtest_teardown(item, nextitem):
    if nextitem is not None and _parallel(item.config) and \
            shared_group(_file(item.nodeid)) == "ray_local" != shared_group(_file(nextitem.nodeid)):
        import ray

        ray.shutdown()
