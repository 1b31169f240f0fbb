"""A network failure told from a missing file, and named: which host, and what failed.

fsspec hides the difference: its HTTP filesystem answers `exists()` with False and raises
`FileNotFoundError(url)` for a refused connection or an unknown host just as for a 404, keeping
the real cause (aiohttp's ClientConnectorError, a socket.gaierror) in `__cause__`. `failure`
walks that chain, so "input not found" or "missing on the mirror" is said only when the server
answered that it has no such file.

    failure(err)             'connection refused', 'host name not resolved', 'timed out', 'HTTP 503 ...', or None
    where(err, url)          the host:port that failed (the exception's, else the URL's)
    exists(fs, path, url)    fs.exists that raises InputError on a network failure, within TIMEOUT_S on HTTP(S)
    no_range_requests(url)   the error for an HTTP server that sends the whole file when asked for a range
    connect(url)             (host:port, what failed) of a TCP connection to a URL's host (or its proxy), or None
    waiting(what, timeout)   a context that logs what it waits for once the wait passes NOTICE_S
    TIMEOUT_S                the bound of each wait that this code sets (dump mirror checks, Dataflow endpoints)
"""

import contextlib
import errno
import logging
import socket
import ssl
import threading
import urllib.parse
import urllib.request

from pipeline.sources.common import InputError

log = logging.getLogger(__name__)

# Each network wait this project sets itself (a mirror's HEAD/GET, a TCP connect to a Dataflow
# endpoint) gives up after this long: a dead route otherwise hangs for aiohttp's 5 minutes, or
# for Beam's staging retries (7 tries from 5 s, doubling: about 10 minutes).
TIMEOUT_S = 30.0
# A wait longer than this says what it waits for (`waiting`); a quicker one says nothing, so that
# a failure that comes at once is still the one line the command prints.
NOTICE_S = 1.0

_ERRNO_WORDS = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "connection reset",
    errno.ENETUNREACH: "network unreachable",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ETIMEDOUT: "timed out",
}


def _chain(error: BaseException):
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        yield error
        error = error.__cause__ or error.__context__


def failure(error: BaseException) -> str | None:
    """What failed on the network, in words, or None when `error` says nothing of the network
    (a real not-found, a permission error). Looks through the exception's causes."""
    for e in _chain(error):
        if isinstance(e, socket.gaierror):
            return "host name not resolved"
        if isinstance(e, TimeoutError):  # socket.timeout, asyncio's and aiohttp's time-outs
            return "timed out"
        if isinstance(e, ssl.SSLError):
            return f"TLS handshake failed ({getattr(e, 'reason', None) or e})"
        if isinstance(e, OSError) and e.errno in _ERRNO_WORDS:
            return _ERRNO_WORDS[e.errno]
        status = getattr(e, "status", None)  # aiohttp's ClientResponseError: an answer, but an error
        if type(e).__name__ == "ClientResponseError" and isinstance(status, int):
            # 404 / 410: the server says it has no such file, which is what the caller tells
            return None if status in (404, 410) else f"HTTP {status} {getattr(e, 'message', '')}".strip()
        if type(e).__name__ in ("ServerDisconnectedError", "ClientPayloadError"):
            return f"the server closed the connection ({e})"
    return None


def where(error: BaseException | None, url: str) -> str:
    """host:port of the failure: aiohttp's ConnectionKey when the exception has one, else the URL's
    (without any credentials)."""
    for e in _chain(error) if error is not None else ():
        host, port = getattr(e, "host", None), getattr(e, "port", None)
        if isinstance(host, str) and host:
            return f"{host}:{port}" if port else host
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname:
        return url
    return f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname


def unreachable(url: str, error: BaseException, doing: str, todo: str) -> InputError | None:
    """An InputError naming `url`, the host and what failed while `doing`, or None when `error` is
    not a network failure. Not a class of its own: a worker's error reaches the launcher as
    traceback text, which pipeline/output/output.py matches by InputError's name."""
    what = failure(error)
    if what is None:
        return None
    if what.startswith("HTTP "):  # reached, but it answered with an error
        return InputError(f"{url}: {where(error, url)} answered {what} while {doing}; {todo}")
    return InputError(f"{url}: cannot reach {where(error, url)} ({what}) while {doing}; {todo}")


def exists(fs, path: str, url: str, doing: str = "checking that it exists",
           todo: str = "check the network and the URL, then run the same command again",
           timeout_s: float | None = None) -> bool:
    """fs.exists, but a network failure raises InputError (naming `url`, the host, what failed while
    `doing`, and `todo`) instead of reading as "no such file". `info` rather than `exists`:
    fsspec's HTTP `exists` swallows the cause, `info` keeps it. On HTTP(S) the whole answer comes
    within `timeout_s` (TIMEOUT_S): fsspec's `info` asks twice (HEAD, then GET), each request
    waiting out aiohttp's read time-out, so a server that takes the connection and never answers
    took twice the wait that `waiting` says (62 s for "up to 30 s")."""
    if url.split("://", 1)[0] not in ("http", "https"):
        return _exists(fs, path, url, doing, todo)
    timeout_s = TIMEOUT_S if timeout_s is None else timeout_s
    answer: list = []

    def ask():
        try:
            answer.append(_exists(fs, path, url, doing, todo))
        except BaseException as e:  # noqa: BLE001 - raised again below, in the caller's thread
            answer.append(e)

    thread = threading.Thread(target=ask, name=f"info {where(None, url)}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if not answer:  # left behind: fsspec's loop drops it at exit
        raise InputError(f"{url}: cannot reach {where(None, url)} (timed out) while {doing}; {todo}")
    if isinstance(answer[0], BaseException):
        raise answer[0]
    return answer[0]


def _exists(fs, path: str, url: str, doing: str, todo: str) -> bool:
    try:
        fs.info(path)
        return True
    except OSError as e:  # FileNotFoundError, or aiohttp's ClientConnectorError (an OSError)
        if (error := unreachable(url, e, doing, todo)):
            raise error from None
        if isinstance(e, FileNotFoundError):
            return False
        raise


def no_range_requests(url: str, pos: int) -> InputError:
    """fsspec reads an HTTP file in blocks, each a range request; a server that answers one with the
    whole file (Python's http.server) can be read from its first block only (fsspec's ValueError
    "The HTTP server doesn't appear to support range requests")."""
    return InputError(f"{url}: the server does not answer HTTP range requests (it sent the whole file when asked for "
                      f"the bytes from {pos}), which reading a file over HTTP needs; serve it from a server that does "
                      "(Wikimedia's and its mirrors, nginx, Apache), or download it and give the local path")


def connect(url: str, timeout_s: float = TIMEOUT_S) -> tuple[str, str] | None:
    """Open (and close) a TCP connection to `url`'s host, or to the proxy the environment names for
    it (HTTPS_PROXY, NO_PROXY), within `timeout_s` seconds, name resolution included (getaddrinfo
    has no time-out of its own: it runs in a daemon thread, left behind if it hangs). None when
    it opens, else (host:port, what failed)."""
    parts = urllib.parse.urlsplit(url)
    host, port = parts.hostname or url, parts.port or (443 if parts.scheme == "https" else 80)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy and not urllib.request.proxy_bypass(host):
        proxy_parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        host, port = proxy_parts.hostname, proxy_parts.port or 80
    errors = []

    def attempt():
        try:
            socket.create_connection((host, port), timeout=timeout_s).close()
        except OSError as e:
            errors.append(e)

    thread = threading.Thread(target=attempt, name=f"connect {host}:{port}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        return f"{host}:{port}", "timed out"
    if errors:
        return f"{host}:{port}", failure(errors[0]) or str(errors[0])
    return None


@contextlib.contextmanager
def waiting(what: str, timeout_s: float):
    """Log "waiting for WHAT (up to N s)" if the block is still running after NOTICE_S seconds."""
    timer = threading.Timer(NOTICE_S, log.info, ("waiting for %s (up to %.0f s)", what, timeout_s))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
