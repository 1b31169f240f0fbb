"""pipeline/sources/network.py with the planner and the reader: a host that cannot be reached is
named, with what failed, and never read as a missing file. Real sockets on 127.0.0.1 (a closed
port, a listening one) and a name that cannot resolve (`.invalid`, RFC 6761)."""

import socket

import pytest

from pipeline.sources import InputError, WorkItem, network, plan_work_items, read_pages


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on: bound, then closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def listening_port():
    """A port on 127.0.0.1 that accepts connections (the kernel's backlog) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]


@pytest.mark.parametrize("name, where", [
    ("enwiki-20261101-pages-articles.xml", "checking that it exists"),  # one file
    ("*.xml.bz2", "listing the input"),  # a glob
])
def test_a_refused_connection_is_named_not_a_missing_input(name, where, closed_port):
    url = f"http://127.0.0.1:{closed_port}/dumps/{name}"
    with pytest.raises(InputError, match=rf"^http://127\.0\.0\.1:{closed_port}/dumps/{name.replace('*', '[*]')}: cannot reach "
                                         rf"127\.0\.0\.1:{closed_port} \(connection refused\) while {where}; check the network"):
        plan_work_items([url])


def test_a_host_name_that_does_not_resolve_is_named():
    url = "http://nonexistent.invalid/dumps/enwiki-20261101-pages-articles.xml.bz2"
    with pytest.raises(InputError, match=rf"^{url}: cannot reach nonexistent\.invalid(:80)? \(host name not resolved\)"):
        plan_work_items([url])


def test_the_reader_names_the_network_too(closed_port):
    """A worker that loses the server after planning: the item's URL, the byte, what failed."""
    url = f"http://127.0.0.1:{closed_port}/enwiki-20261101-pages-articles.xml"
    with pytest.raises(InputError, match=rf"^{url}: cannot reach 127\.0\.0\.1:{closed_port} \(connection refused\) "
                                         r"while reading it at byte 0; check the network, then run the same command again"):
        list(read_pages(WorkItem(url, "xml", lang="en")))


def test_connect_names_the_failure_and_the_host(closed_port, listening_port, monkeypatch):
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert network.connect(f"http://127.0.0.1:{listening_port}", 5) is None
    assert network.connect(f"http://127.0.0.1:{closed_port}", 5) == (f"127.0.0.1:{closed_port}", "connection refused")
    assert network.connect("https://nonexistent.invalid", 5) == ("nonexistent.invalid:443", "host name not resolved")
    # Behind a proxy, the connection that matters is the proxy's; a host in NO_PROXY is reached directly.
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{closed_port}")
    assert network.connect("https://nonexistent.invalid", 5) == (f"127.0.0.1:{closed_port}", "connection refused")
    monkeypatch.setenv("NO_PROXY", "nonexistent.invalid")
    assert network.connect("https://nonexistent.invalid", 5) == ("nonexistent.invalid:443", "host name not resolved")


def test_failure_reads_the_causes_and_leaves_a_real_not_found_alone():
    refused = ConnectionRefusedError(111, "Connect call failed")
    try:
        try:
            raise refused
        except OSError as e:
            raise FileNotFoundError("http://h/x") from e  # fsspec's shape
    except FileNotFoundError as wrapped:
        assert network.failure(wrapped) == "connection refused"
    assert network.failure(FileNotFoundError("http://h/x")) is None
    assert network.failure(socket.gaierror(-2, "Name or service not known")) == "host name not resolved"
    assert network.failure(TimeoutError()) == "timed out"


def test_a_mirror_that_never_answers_takes_the_wait_it_says(listening_port):
    """A server that takes the connection and never answers. fsspec's `info`
    asks twice (HEAD, then GET), each waiting out the read time-out: "up to 30 s" took 62 s.
    The whole check now ends within the one wait it says."""
    import time

    from pipeline.sources import dumps

    dump = dumps.Dump("en", "20261101", mirror=f"http://127.0.0.1:{listening_port}")
    t = time.monotonic()
    with pytest.raises(InputError, match=rf"^{dump.dump_url}: cannot reach 127\.0\.0\.1:{listening_port} \(timed out"):
        dumps.missing_files(dump, timeout_s=2)
    took = time.monotonic() - t
    assert took < 3.5, took  # before: 2 s for the HEAD, 2 s more for the GET
