"""The one place where an exception becomes the line a `canine` user reads, and the exit status.

    canine preprocess: --dump ko:20261101: missing on the mirror: https://...; check the language and date ...
    canine preprocess: gs://bkt/shards/.staging-ac8a82b31d0c1071: no such file or object (this run's staging
        folder in the output directory); check the path or URL, and that these credentials can see it
        (traceback: /tmp/canine/preprocess-20261125T041227Z-15446.txt)
    canine export: unexpected RuntimeError: boom (traceback: /tmp/canine/export-20261125T041227Z-15446.txt)

`report(command, error, objects)` prints one line on stderr, `canine COMMAND: OBJECT: MEANING; WHAT TO DO`,
and returns the exit status (jobs/cli.py's docstring lists them):
- a known error (KNOWN: the project's own exception classes, a ValueError of a bad flag or value)
  carries a message that names the object, what happened and what to do: printed as it is, 2;
  one that shortened a library's error (`whole_error`: MLflow's) names the file that holds it whole;
- an OSError whose text is only a path and errno text (gcsfs, s3fs and fsspec's http raise
  `FileNotFoundError(path)`) gets its meaning in words and what the path is for, from `objects`
  (URL or glob -> "the output directory (--output)"), 2; its traceback is written too, since a
  missing object the user did not name is as likely a bug as a typo;
- anything else is unexpected: its type and first line, and the file holding its traceback, 2;
- a closed stdout or stderr pipe (`canine preprocess ... 2>&1 | head -1`): nothing printed, no
  traceback, 141 (128 + SIGPIPE, what a shell reports for `yes | head`): the reader has all it wanted;
- Ctrl-C: "interrupted", 130 (128 + SIGINT, what a shell reports for a process it interrupted);
  a driver that knows what was done raises contract/interrupted.py's `Interrupted("interrupted
  after ...; the same command resumes")` from the KeyboardInterrupt, printed as it is, 130.
Credentials in URLs are masked everywhere, the traceback file included (contract/files.py `redact`).
"""

import datetime
import errno
import fnmatch
import json
import os
import re
import signal
import sys
import tempfile
import traceback

from contract.files import redact
from contract.interrupted import Interrupted

# Exceptions whose messages this project writes to be read: each names the object, what happened
# and what to do. By qualified name, so that no command imports Ray or Beam to recognize them; a
# subclass counts (ManifestError is a ValueError; DumpNotFound a FileNotFoundError). Every name
# must resolve: tests/jobs/test_errors.py imports each.
KNOWN = (
    "builtins.ValueError",  # a bad flag, value, config, manifest or combination (our messages)
    "pipeline.sources.InputError",  # bad or missing input (its __module__ is the package's)
    "pipeline.output.output.OutputExistsError",
    "pipeline.output.output.PublishError",
    "pipeline.output.disk.NoSpace",  # the staging disk too small, or full mid-run: path, needed, free, what to do
    "contract.lock.LockHeld",
    "contract.lock.LockLost",
    "pipeline.sources.dumps.DumpNotFound",
    "jobs.submit.ClusterError",
    "training.train.export.ExportError",
    "training.train.rundir.NotARun",
    "training.train.failures.FatalError",
    "training.train.resources.ClusterTooSmall",
    "training.train.run.ClusterUnreachable",
)
EXIT_ERROR = 2
EXIT_INTERRUPTED = 130
EXIT_CLOSED_PIPE = 128 + signal.SIGPIPE



# errno -> (what it means, what to do), for OSErrors that say no more than a path.
_MEANING = {
    errno.ENOENT: ("no such file or object", "check the path or URL, and that these credentials can see it"),
    errno.EACCES: ("permission denied", "check the credentials, or the permissions of the file or folder"),
    errno.EPERM: ("operation not permitted", "check the credentials, or the permissions of the file or folder"),
    errno.ENOSPC: ("no space left on the device", "free some space or write somewhere else"),
    errno.EROFS: ("read-only file system", "write somewhere else"),
    errno.EEXIST: ("already exists", "remove it or choose another path"),
    errno.EISDIR: ("a directory where a file was expected", "check the path"),
    errno.ENOTDIR: ("a part of the path is a file, not a directory", "check the path"),
}
_ERRNO_OF = ((FileNotFoundError, errno.ENOENT), (PermissionError, errno.EACCES), (FileExistsError, errno.EEXIST),
             (IsADirectoryError, errno.EISDIR), (NotADirectoryError, errno.ENOTDIR))
_ERRNO_PREFIX = re.compile(r"^\s*\[Errno -?\d+\]\s*")
_WORD = re.compile(r"[^\W\d_]{2,}")


def report(command: str, error: BaseException, objects: dict[str, str] | None = None, *,
           as_json: bool = False) -> int:
    """Print the line for `error` (stderr; with `as_json` also {"error": line} on stdout, so that
    stdout stays one JSON document) and return the exit status. `objects`: URL, path or glob ->
    what it is, to name what a bare path was for."""
    if isinstance(error, BrokenPipeError):  # the reader of our output went away: nothing to say, nowhere to say it
        return closed_pipe()
    if isinstance(error, Interrupted):
        line, code = one_line(error.message), EXIT_INTERRUPTED
    elif isinstance(error, KeyboardInterrupt):
        line, code = "interrupted", EXIT_INTERRUPTED
    else:
        line, code = describe(command, error, objects), EXIT_ERROR
    try:
        print(f"canine {command}: {line}", file=sys.stderr)
        if as_json:
            from jobs import quiet

            print(json.dumps({"error": line}, ensure_ascii=False), file=quiet.document())
    except BrokenPipeError:
        return closed_pipe()
    return code


def closed_pipe() -> int:
    """The reader of stdout or stderr went away: end quietly with a shell's SIGPIPE status, as
    `yes | head` does. Both are pointed at /dev/null first, else the interpreter's own flush at
    exit raises again, prints "Exception ignored" and exits 120 (the Python docs' recipe, signal
    module, "Note on SIGPIPE"). What the command holds (the output's lock) was released on the way
    out; the same command resumes."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (AttributeError, OSError, ValueError):  # a stream without a descriptor (pytest's capture)
            pass
    os.close(devnull)
    return EXIT_CLOSED_PIPE


def describe(command: str, error: BaseException, objects: dict[str, str] | None = None) -> str:
    """The line for `error` without the `canine COMMAND: ` prefix (module docstring)."""
    if is_known(error):
        line = one_line(str(error)) or type(error).__name__
        if getattr(error, "whole_error", False):  # a library's error shortened in the line: the whole of it on file
            line += f" (the whole error: {write_traceback(command, error)})"
        return line
    if isinstance(error, OSError) and _bare(error):
        return f"{_os_error_line(error, objects or {})} (traceback: {write_traceback(command, error)})"
    first = one_line(str(error).strip().splitlines()[0] if str(error).strip() else "")
    cause = f"unexpected {type(error).__name__}" + (f": {first[:300]}" if first else "")
    return f"{cause} (traceback: {write_traceback(command, error)})"


def is_known(error: BaseException) -> bool:
    """An error whose message was written for the user: a KNOWN class, or an OSError raised by our
    own code with a sentence that names its object (data.py's "URL: no manifest; --data must ...")."""
    names = {f"{c.__module__}.{c.__qualname__}" for c in type(error).__mro__}
    if names & set(KNOWN):
        return True
    return isinstance(error, OSError) and not _bare(error) and _names_an_object(error)


def one_line(text: str) -> str:
    """`text` on one line (a YAML or worker error spans several), credentials masked."""
    return redact(" ".join(line.strip() for line in str(text).splitlines() if line.strip()))


def _names(error: OSError) -> list[str]:
    return [str(n) for n in (error.filename, error.filename2) if n is not None]


def _pathlike(token: str) -> bool:
    return "/" in token or "\\" in token


def _bare(error: OSError) -> bool:
    """True when the message says no more than a path and errno text: "bkt/shards/.staging-ac8a",
    "[Errno 2] No such file or directory: '/x'", or nothing at all."""
    rest = _ERRNO_PREFIX.sub("", str(error))
    for name in _names(error):
        rest = rest.replace(repr(name), " ").replace(name, " ")
    if error.strerror:
        rest = rest.replace(error.strerror, " ")
    words = [w for token in rest.split() if not _pathlike(token) for w in _WORD.findall(token)]
    return len(words) < 2


def _names_an_object(error: OSError) -> bool:
    text = str(error)
    return bool(_names(error)) or any(_pathlike(t) for t in text.split()) or "'" in text or '"' in text


def _path_of(error: OSError) -> str | None:
    names = _names(error)
    if names:
        return names[0]
    tokens = _ERRNO_PREFIX.sub("", str(error)).split()
    return tokens[0].strip("'\"") if len(tokens) == 1 else None


def _key(url: str) -> str:
    """A URL or path as compared: no protocol, local paths absolute, no leading slash (gcsfs and
    s3fs name objects `bucket/key`, fsspec's memory filesystem `/bucket/key`)."""
    if "://" in url:  # the query is no part of the name (a signed URL's signature, an http mirror's ?download)
        return url.split("://", 1)[1].split("?", 1)[0].split("#", 1)[0].lstrip("/")
    return os.path.abspath(url).lstrip("/") if url else url


def what_is(path: str, objects: dict[str, str]) -> tuple[str, str | None]:
    """(the path as shown, what it is): the most specific entry of `objects` that `path` is, matches
    (a glob) or lies under. Shown with the entry's protocol when the path lost it (gcsfs's
    `bkt/x` for `gs://bkt/x`)."""
    best = None
    for url, what in objects.items():
        if not url:
            continue
        key = _key(url).rstrip("/")
        for candidate in {path.lstrip("/"), _key(path)}:  # a bucket path (gcsfs's `bkt/x`), or a local one
            if fnmatch.fnmatchcase(candidate, key) or fnmatch.fnmatchcase(candidate, key + "/*"):
                if best is None or len(key) > len(best[0]):
                    best = (key, url, what, candidate)
    if best is None:
        return redact(path), None
    _, url, what, candidate = best
    shown = path
    if "://" in url and "://" not in path:
        shown = f"{url.split('://', 1)[0]}://{candidate}"
    return redact(shown), what


def _os_error_line(error: OSError, objects: dict[str, str]) -> str:
    code = error.errno or next((n for cls, n in _ERRNO_OF if isinstance(error, cls)), None)
    meaning, todo = _MEANING.get(code, ((error.strerror or type(error).__name__).lower(),
                                        "check the path or URL, the network and the credentials"))
    path = _path_of(error)
    if path is None:
        return f"a file or object this command needed: {meaning}; {todo}"
    shown, what = what_is(path, objects)
    return f"{shown}: {meaning}{f' ({what})' if what else ''}; {todo}"


def traceback_dir() -> str:
    """Where tracebacks go: the machine's temp folder (TMPDIR), not the run's output: the output
    may be an object store, may not exist, or may be what failed, and a traceback is for this
    machine's user, not for the data. Ray keeps its own session logs there too (/tmp/ray)."""
    return os.path.join(tempfile.gettempdir(), "canine")


def write_traceback(command: str, error: BaseException) -> str:
    """Write `error`'s traceback (credentials masked) to a new file; returns its path. Readable by
    this user only: a traceback holds paths and values of the run. If the shared folder is not
    ours to write in, a file of our own in the temp folder; if that fails too, stderr."""
    from contract.extras import version

    now = datetime.datetime.now(datetime.timezone.utc)
    text = redact(f"canine {command} failed at {now.isoformat(timespec='seconds')}, pid {os.getpid()}\n"
                  f"canine {version()}, Python {sys.version.split()[0]}; process arguments: {sys.argv}\n\n"
                  + "".join(traceback.format_exception(error)))
    name = f"{command}-{now.strftime('%Y%m%dT%H%M%SZ')}-{os.getpid()}"
    try:
        folder = traceback_dir()
        os.makedirs(folder, mode=0o700, exist_ok=True)
        path, n = os.path.join(folder, f"{name}.txt"), 1
        while True:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                break
            except FileExistsError:  # two errors in one second of one process
                n += 1
                path = os.path.join(folder, f"{name}-{n}.txt")
    except OSError:
        try:
            fd, path = tempfile.mkstemp(prefix=f"canine-{name}-", suffix=".txt")
        except OSError as e:
            sys.stderr.write(text)
            return f"not written ({e.strerror}); printed above"
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return path
