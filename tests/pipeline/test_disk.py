"""pipeline/output/disk.py: the staging's peak from the inputs' sizes, the line that says it, the refusal
of a run that cannot fit, and a full disk found behind the runner's wrapping. A real full disk:
test_disk_full.py."""

import errno

import pytest

from pipeline.output import disk
from pipeline.sources import plan

MB = 10**6


def test_the_peak_follows_the_inputs_kinds_and_sizes():
    per_text = sum(disk.STAGED_PER_TEXT_BYTE.values())
    xml = disk.staging_peak_bytes([("a.xml", "xml", 100 * MB)])
    assert xml == disk.STAGED_FIXED_BYTES + int(100 * MB * disk.CLEANED_PER_STORED_BYTE["xml"] * per_text)
    bz2 = disk.staging_peak_bytes([("a.xml.bz2", "xml", 100 * MB)])  # ~4.5x the text of the same bytes of XML
    assert bz2 - disk.STAGED_FIXED_BYTES == pytest.approx(plan.TEXT_PER_STORED_BYTE["bz2"] * (xml - disk.STAGED_FIXED_BYTES), rel=1e-6)
    both = disk.staging_peak_bytes([("a.xml", "xml", 100 * MB), ("b.parquet", "parquet", 10 * MB)])
    assert both > xml and disk.staging_peak_bytes([]) == disk.STAGED_FIXED_BYTES
    # the tokenizer's sample: as the text of a small input, of tokenizer_pages pages of a big one
    small = disk.staging_peak_bytes([("a.xml", "xml", MB)], tokenizer_pages=50_000)
    assert small - disk.staging_peak_bytes([("a.xml", "xml", MB)]) == int(0.5 * MB * disk.TOKENIZER_SAMPLE_PER_TEXT_BYTE)
    big = [("a.xml", "xml", 100_000 * MB)]
    assert disk.staging_peak_bytes(big, tokenizer_pages=100) - disk.staging_peak_bytes(big) == pytest.approx(
        100 * disk.TOKENIZER_PAGE_BYTES * disk.TOKENIZER_SAMPLE_PER_TEXT_BYTE, abs=1)


def test_the_first_line_says_the_peak_and_the_free_space():
    staging = "out/.staging-ab12cd34ef56ab12"
    assert disk.first_line(3_100_000_000, staging, 71_400_000_000) == (
        "staging needs about 3.1 GB at its peak (out/.staging-ab12cd34ef56…; 71.4 GB free there)")
    assert disk.first_line(650 * MB, staging, 2_000_000_000, staged=120 * MB).endswith(
        "2.0 GB free there, and 120.0 MB already staged by an interrupted run, reused or freed by this one)")
    assert disk.first_line(650 * MB, "gs://b/out/.staging-ab12cd34ef56ab12", None) == (
        "staging needs about 650.0 MB at its peak (gs://b/out/.staging-ab12cd34ef56…; an object store: no free-space "
        "figure)")


def test_a_run_that_cannot_fit_is_refused_in_one_line():
    staging = "out/.staging-ab12cd34ef56ab12"
    disk.check_fits(5 * MB, staging, "out", free=5 * MB)  # fits exactly
    disk.check_fits(5 * MB, staging, "out", free=3 * MB, staged=2 * MB)  # a killed run's items count as free
    disk.check_fits(5 * MB, staging, "gs://b/out", free=None)  # an object store: no figure, no refusal
    with pytest.raises(disk.NoSpace) as caught:
        disk.check_fits(5 * MB, staging, "out", free=2 * MB)
    assert str(caught.value) == (
        "--output out: not enough disk space for this run: staging (out/.staging-ab12cd34ef56…) needs about 5.0 MB "
        "at its peak and 2.0 MB is free there; free 3.0 MB there, or give an --output on a disk with room; nothing "
        "was written")
    assert caught.value.errno == errno.ENOSPC


def test_free_space_of_a_local_folder_not_made_yet_and_none_for_a_store(tmp_path):
    free = disk.free_bytes(str(tmp_path / "not" / "yet" / ".staging-x"))
    assert free is not None and free > 0
    assert disk.free_bytes("memory://bucket/out/.staging-x") is None


# How a worker's ENOSPC reaches the launcher from the DirectRunner's worker processes: a
# RuntimeError holding the worker's traceback (pipeline/output/output.py's _input_error_in has the same).
WORKER = ("Pipeline failed: Traceback (most recent call last):\n  File \"contract/files.py\", line 74, in atomic_write\n"
          "OSError: [Errno 28] No space left on device [while running 'ReadAndClean/ParseAndClean']\n")


def test_a_full_disk_is_found_behind_the_runners_wrapping():
    assert disk.no_space_in(RuntimeError(WORKER))
    assert disk.no_space_in(OSError(errno.ENOSPC, "No space left on device"))
    try:  # raised while handling it, as Beam re-raises
        try:
            raise OSError(errno.ENOSPC, "x")
        except OSError:
            raise RuntimeError("bundle failed") from None
    except RuntimeError as e:
        wrapped = e
    assert disk.no_space_in(wrapped.__context__) and not disk.no_space_in(RuntimeError("bundle failed"))
    assert not disk.no_space_in(OSError(errno.EACCES, "Permission denied"))
    line = str(disk.filled("out/.staging-ab12cd34ef56ab12", 5 * MB, 0, 3, 20))
    assert line.startswith("out/.staging-ab12cd34ef56…: no space left on the device while the job wrote its staging")
    assert "needs about 5.0 MB at its peak, 0 kB free there now): nothing was published;" in line
    assert "it resumes from the 3 of 20 work items already read (kept)" in line
