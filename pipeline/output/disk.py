"""The staging folder's disk: how much it needs at its peak, known from the inputs' sizes before
the job starts; a job that cannot fit refused before it writes; a disk that fills mid-run one line.

    canine preprocess: staging needs about 3.1 GB at its peak (out/.staging-ab12…; 71.4 GB free there)

Everything the job writes goes to OUTPUT/.staging-<sha>/ (pipeline/output/output.py) and stays there
until it publishes, which on a local disk is a rename (no second copy): the staging's peak is the
run's peak. What is in it, per byte of cleaned text (UTF-8, what the cleaner keeps of a page),
is STAGED_PER_TEXT_BYTE; the cleaned text follows from each input's stored size and kind
(CLEANED_PER_STORED_BYTE, via sources/plan.py's TEXT_PER_STORED_BYTE for compressed XML).

Measured (a --workers 2 run sampling `du` of staging every 0.1 s, at ca6442a: every staged file
stays until the run publishes, so the peak is their sum): the real pages of tests/data/wiki (15
languages, 2.0 MB of XML, 0.96 MB of cleaned text), per byte of cleaned text: items 0.47, pages
(pack groups) 0.39, tokenizer sample 0.37, packed 0.61, sampled 0.50, shards 0.85, plus 0.42 MB
(tokenizer, stats, lists); peak 3.5 MB, 1.76 x the XML. The bundled sample (1.2 MB of XML,
0.72 MB cleaned): 0.20, 0.13, 0.11, 0.36, 0.36, 0.61; peak 1.48 MB. Cleaned text is 0.48 x XML
on the real pages, 0.59 on the sample. The table takes the real pages' figures, rounded up.
Before the file-based shuffles (b86d9bd) staging held only items and shards: peak 0.85 x XML.

An object store has no free-space figure: the estimate alone is said. A disk that fills anyway
(another writer, an estimate too low) fails the job with ENOSPC, in a worker or here:
`no_space_in` finds it behind the runner's wrapping and the CLI prints `NoSpace`'s one line:
the path, needed and free, what to do; nothing is published, the finished work items stay in
staging, and the same command resumes from them.
"""

import errno
import os
import re
import shutil

import fsspec

from contract.files import is_local, redact

# Bytes in staging per byte of cleaned text, by the folder that holds them: RECALIBRATE when the
# job writes other files to staging (du of staging during a run, as the module docstring says).
STAGED_PER_TEXT_BYTE = {
    "items": 0.5,  # each work item's cleaned pages, zstd (real pages: 0.47)
    "pages": 0.4,  # the kept pages scattered to their pack groups (0.39)
    "packed": 0.65,  # packed examples, by shard (0.61)
    "sampled": 0.55,  # the examples after language sampling, by shard (0.50)
    "shards": 0.9,  # the shards: int32 codepoints and mask columns, zstd (0.85; sample 0.61)
}
# The tokenizer's sample (STAGING/tokenizer/): as the pages' text (0.37 on the real pages), but
# of `tokenizer_pages` pages at most (pipeline/beam/tokenizer_sample.py), each counted at this many
# bytes of cleaned text (a generous page: enwiki's articles average ~3 kB); none with --tokenizer.
TOKENIZER_SAMPLE_PER_TEXT_BYTE = 0.4
TOKENIZER_PAGE_BYTES = 16_000
# Whatever the size of the input: the tokenizer (~0.4 MB at 32k words), stats, lists, rejects.
STAGED_FIXED_BYTES = 4 << 20
# Cleaned text per byte of text an input holds: a MediaWiki dump's XML keeps about half (0.48
# on the real pages, 0.59 on the sample: markup, templates, tables and end matter go); JSON Lines
# and Parquet rows are cleaned text already, Parquet's compressed (~2.5x with zstd or snappy).
CLEANED_PER_STORED_BYTE = {"xml": 0.5, "jsonl": 1.0, "parquet": 2.5}


class NoSpace(OSError):
    """The staging disk is too small for the job (refused before it starts) or filled while it
    ran: the message names the path, the space needed and free, and what to do."""

    def __init__(self, message: str):
        super().__init__(errno.ENOSPC, message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def cleaned_bytes(path: str, kind: str, stored: int) -> int:
    """About how many bytes of cleaned text an input file of `stored` bytes gives."""
    from pipeline.sources import plan

    return int(plan.text_bytes(path, stored) * CLEANED_PER_STORED_BYTE.get(kind, 1.0))


def staging_peak_bytes(inputs, tokenizer_pages: int = 0) -> int:
    """The staging folder's estimated peak for inputs given as (path, kind, stored bytes), with a
    tokenizer trained on `tokenizer_pages` pages (0: a given one)."""
    text = sum(cleaned_bytes(path, kind, size) for path, kind, size in inputs)
    sample = min(text, tokenizer_pages * TOKENIZER_PAGE_BYTES) * TOKENIZER_SAMPLE_PER_TEXT_BYTE
    return STAGED_FIXED_BYTES + int(text * sum(STAGED_PER_TEXT_BYTE.values()) + sample)


def free_bytes(url: str) -> int | None:
    """Bytes free to this user on the disk that holds `url` (the nearest folder of it that
    exists); None on an object store or where the filesystem cannot say."""
    fs, path = fsspec.core.url_to_fs(url)
    if not is_local(fs):
        return None
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def staged_bytes(url: str) -> int:
    """Bytes already in a staging folder (a killed run's work items): reused or freed by this run."""
    fs, path = fsspec.core.url_to_fs(url)
    try:
        return int(fs.du(path)) if fs.exists(path) else 0
    except (OSError, NotImplementedError):
        return 0


def size(n: float) -> str:
    """3.1 GB, 650 MB, 12 kB: the units `df -H` uses."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{max(n, 0) / 1e3:.0f} kB"


def shown(staging: str) -> str:
    """A staging URL as lines show it: the config sha cut to 12 hex digits, credentials masked."""
    return redact(re.sub(r"(\.staging-[0-9a-f]{12})[0-9a-f]+$", r"\1…", staging.rstrip("/")))


def first_line(peak: int, staging: str, free: int | None, staged: int = 0) -> str:
    """What the run says before it starts: the peak, where, and the free space there."""
    where = shown(staging)
    if free is None:
        return f"staging needs about {size(peak)} at its peak ({where}; an object store: no free-space figure)"
    # What an earlier, killed run staged is not part of the free space: it is this run's to reuse
    # or free, so the line says so ("2.0 GB free there, 120 MB of it staged already" read as if
    # the staged files were inside the free space).
    kept = f", and {size(staged)} already staged by an interrupted run, reused or freed by this one" if staged else ""
    return f"staging needs about {size(peak)} at its peak ({where}; {size(free)} free there{kept})"


def check_fits(peak: int, staging: str, output: str, free: int | None, staged: int = 0) -> None:
    """NoSpace before anything is written if the staging's peak does not fit in the free space
    (plus what staging holds already, which this run reuses or frees)."""
    if free is None or free + staged >= peak:
        return
    raise NoSpace(
        f"--output {redact(output)}: not enough disk space for this run: staging ({shown(staging)}) needs about "
        f"{size(peak)} at its peak and {size(free + staged)} is free there; free {size(peak - free - staged)} "
        "there, or give an --output on a disk with room; nothing was written")


# How ENOSPC reaches the launcher: an OSError (or pyarrow's, "[errno 28] No space left on device"
# in its text) raised in this process, or a worker's, as a RuntimeError holding its traceback
# (the DirectRunner's multi_processing mode and remote runners: pipeline/output/output.py's _input_error_in).
_ENOSPC_TEXT = re.compile(r"\[errno 28\]|No space left on device|ENOSPC", re.I)


def no_space_in(error: BaseException) -> bool:
    """Whether a run's failure is a full disk, behind whatever wrapped it."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno == errno.ENOSPC:
            return True
        if _ENOSPC_TEXT.search(str(error)):
            return True
        error = error.__cause__ or error.__context__
    return False


def filled(staging: str, peak: int, free: int | None, done: int, total: int) -> NoSpace:
    """NoSpace for a disk that filled while the job ran."""
    now = "" if free is None else f", {size(free)} free there now"
    return NoSpace(
        f"{shown(staging)}: no space left on the device while the job wrote its staging (this run's staging "
        f"folder in the output directory; it needs about {size(peak)} at its peak{now}): nothing was published; "
        f"free space there and run the same command again: it resumes from the {done} of {total} work items "
        "already read (kept); or give an --output on a disk with room")
