"""Each composite of pipeline/job.py on its own, with TestPipeline and no I/O (Beam's own habit)."""

import math

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from pipeline import job
from pipeline.config import PreprocessConfig
from pipeline.sources import RawPage


def _opts():
    from pipeline.runners import beam_options

    return beam_options(1, "DirectRunner")  # named: never Prism


def raw(page_id, text, ns=0, redirect=False, error=None, lang="en"):
    return RawPage(page_id=page_id, title=f"T{page_id}", ns=ns, redirect=redirect, text=text, lang=lang,
                   source=f"test@{page_id}", error=error)


def test_clean_pages_gives_every_page_one_outcome_and_keeps_rejects():
    pages = [
        raw(1, "'''Alpha''' is a [[letter]].\n\nSecond paragraph."),
        raw(2, "#REDIRECT [[Alpha]]", redirect=True),
        raw(3, "talk text", ns=1),
        raw(4, "", error="non-integer <id> 'x'"),
        raw(5, "{{Infobox only}}"),
        raw(6, "bad \ue003 char"),
    ]
    with TestPipeline(options=_opts()) as p:
        out = p | beam.Create(pages) | job.CleanPages()
        assert_that(
            out.outcomes,
            equal_to([("en", "kept"), ("en", "redirects"), ("en", "non_article"), ("en", "parse_errors"),
                      ("en", "empty"), ("en", "kept")]),
            label="Outcomes",
        )
        assert_that(out.kept | beam.Map(lambda p: p.page_id), equal_to([1, 6]), label="Kept")
        assert_that(out.rejects | beam.Map(lambda r: (r["page_id"], r["outcome"])),
                    equal_to([(4, "parse_errors"), (5, "empty")]), label="Rejects")
        assert_that(out.replaced, equal_to([("en", 1)]), label="Replaced")


def test_clean_pages_counts_what_kept_pages_lost_and_follows_the_config():
    from pipeline import contract

    pages = [raw(1, "Text.{{Infobox x}}\n{|\n| a\n|}\n== See also ==\n* [[Y]]"), raw(2, "{{Infobox only}}"), raw(3, "Plain.")]
    lost = tuple(int(r in ("infoboxes", "tables", "end_matter")) for r in contract.CONSTRUCT_DROPS)
    with TestPipeline(options=_opts()) as p:
        out = p | beam.Create(pages) | job.CleanPages()
        assert_that(out.dropped, equal_to([("en", lost)]), label="Dropped")  # kept pages only
        assert_that(out.kept | beam.Map(lambda p: p.text), equal_to(["Text.", "Plain."]), label="Kept")
    with TestPipeline(options=_opts()) as p:
        out = p | beam.Create(pages[:1]) | job.CleanPages(PreprocessConfig(keep_tables=True, keep_end_matter=True))
        assert_that(out.kept | beam.Map(lambda p: p.text), equal_to(["Text.\na\nSee also\nY"]), label="KeptAll")


def test_assign_split_is_a_pure_function_of_lang_and_page_id():
    pages = [job.Page("en", i, "x") for i in range(2000)]
    splits = [job.split_of(p, 0.05) for p in pages]
    assert 40 <= splits.count("validation") <= 160  # ~5% of 2000
    assert splits == [job.split_of(p, 0.05) for p in pages]
    assert job.split_of(job.Page("de", 7, "x"), 0.0) == "train"


def test_language_weights_follow_exponential_smoothing_and_keep_the_total():
    counts = {"en": 900, "sw": 100}
    w = job.language_weights(counts, 0.7)
    total = sum(counts[l] * w[l] for l in counts)
    assert total == pytest.approx(1000)
    p_en = 0.9**0.7 / (0.9**0.7 + 0.1**0.7)
    assert counts["en"] * w["en"] / total == pytest.approx(p_en)
    assert w["en"] < 1 < w["sw"]  # big language subsampled, small one repeated
    assert job.language_weights({"en": 5}, 0.7) == {"en": pytest.approx(1.0)}


def test_sample_languages_repeats_small_languages_with_new_copies():
    from pipeline.examples import PackedExample

    def ex(first, part=0):
        return PackedExample([first], np.zeros(3, np.int32), np.zeros(3, np.int8), -1, part)

    packed = [("train", "en", ex(i)) for i in range(90)] + [("train", "sw", ex(i)) for i in range(10)]
    packed += [("validation", "sw", ex(1000))]
    cfg = PreprocessConfig(alpha=0.5)
    with TestPipeline(options=_opts()) as p:
        sampled, _ = p | beam.Create(packed) | job.SampleLanguages(cfg)
        counts = sampled | beam.Map(lambda x: (x[0], x[1])) | beam.combiners.Count.PerElement()

        def check(rows):
            d = dict(rows)
            w = job.language_weights({"en": 90, "sw": 10}, 0.5)
            assert d[("validation", "sw")] == 1
            assert abs(d[("train", "sw")] - 10 * w["sw"]) <= 3
            assert abs(d[("train", "en")] - 90 * w["en"]) <= 6

        assert_that(counts, check)


def test_shard_counts_follow_data_size():
    assert job.shard_counts({"train": 10, "validation": 0}, 4) == {"train": 3, "validation": 1}
    # From the packed sizes before replication: train counts each language's expected copies.
    sizes = {("train", "en"): (90, 900), ("train", "sw"): (10, 100), ("validation", "sw"): (1, 35)}
    plan = job.sizing(sizes, 0.5, 100)
    w = job.language_weights({"en": 90, "sw": 10}, 0.5)
    assert plan["weights"] == w
    assert plan["shards"] == {"train": math.ceil((900 * w["en"] + 100 * w["sw"]) / 100), "validation": 1}
    assert plan["shards"]["train"] == 10  # the total is kept: 1000 codepoints expected
    assert job.sizing(dict(reversed(sizes.items())), 0.5, 100) == plan  # arrival order does not matter
    assert job.shard_name("train", 3, 12) == "train/part-00003-of-00012.parquet"
