"""Each composite of pipeline/beam/job.py on its own, with TestPipeline (Beam's own habit): Create -> the
transform -> assert_that; the caches, the spilled files and the writers on files in tmp_path,
nothing else. Between the steps travel only counts, keys and file references (pipeline/beam/spill.py):
the tests build those the way the step before builds them."""

import hashlib
import json
import math

import apache_beam as beam
import numpy as np
import pyarrow.parquet as pq
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from contract import schema
from pipeline.beam import itemcache, job, spill, split, stats, tally, tokenizer_sample
from pipeline.beam.elements import MaskHistograms, PackedFile, PackGroup, ShardKey, SplitLang, Size, Sizing, Vocabulary
from pipeline.rows.examples import PackedExample, codepoints_to_text, example_id, pack_pages
from pipeline.hashing import stable_int
from pipeline.preprocess_config import PreprocessConfig
from pipeline.wikitext.clean import CleanOptions
from pipeline.sources import RawPage, plan_work_items
from pipeline.rows.tokenizer import alphabet_of, train_wordpiece


def _opts():
    from pipeline.beam.runners import beam_options

    return beam_options(1, "DirectRunner")  # named: never Prism


def raw(page_id, text, ns=0, redirect=False, error=None, lang="en"):
    return RawPage(page_id=page_id, title=f"T{page_id}", ns=ns, redirect=redirect, text=text, lang=lang,
                   source=f"test@{page_id}", error=error)


def tally_of(pages, cfg=PreprocessConfig(), item="item"):
    t, options = tally.Tally(), CleanOptions.of(cfg)
    for page in pages:
        t.add(itemcache.clean_raw(page, options))
    return t.done(item, "en")


def test_a_tally_gives_every_page_one_outcome_and_keeps_no_page():
    pages = [
        raw(1, "'''Alpha''' is a [[letter]].\n\nSecond paragraph."),
        raw(2, "#REDIRECT [[Alpha]]", redirect=True),
        raw(3, "talk text", ns=1),
        raw(4, "", error="non-integer <id> 'x'"),
        raw(5, "{{Infobox only}}"),
        raw(6, "bad \ue003 char"),
    ]
    t = tally_of(pages)
    assert dict(zip(schema.PAGE_OUTCOMES, t.outcomes)) == dict.fromkeys(schema.PAGE_OUTCOMES, 0) | {
        "kept": 2, "redirects": 1, "non_article": 1, "parse_errors": 1, "empty": 1}
    assert (t.kept, t.rejects, t.replaced) == (2, 2, 1)  # rejects: the parse error and the empty page
    assert t.smallest == tuple(sorted(split.split_hash("en", i) for i in (1, 6)))  # the kept pages' hashes
    assert all(isinstance(x, (int, str, tuple)) for x in t)  # counts, never a page's text


def test_a_tally_counts_what_kept_pages_lost_and_follows_the_config():
    pages = [raw(1, "Text.{{Infobox x}}\n{|\n| a\n|}\n== See also ==\n* [[Y]]"), raw(2, "{{Infobox only}}"), raw(3, "Plain.")]
    lost = tuple(int(r in ("infoboxes", "tables", "end_matter")) for r in schema.CONSTRUCT_DROPS)
    assert tally_of(pages).dropped == lost  # kept pages only
    assert tally_of(pages).headings[3] == {"See also": 1}  # the end matter dropped, by title
    kept_all = tally_of(pages[:1], PreprocessConfig(keep_tables=True, keep_end_matter=True))
    assert not any(kept_all.dropped[schema.CONSTRUCT_DROPS.index(r)] for r in ("tables", "end_matter"))


def test_a_tally_keeps_the_smallest_split_hashes_only():
    t = tally.Tally()
    for i in range(300):
        t.add(itemcache.clean_raw(raw(i, f"Page {i}.")))
    smallest = t.done("item", "en").smallest
    assert smallest == tuple(sorted(split.split_hash("en", i) for i in range(300))[: tally.EXACT_VALIDATION_PAGES])
    # merged over items in any grouping: the same kept count and hashes
    halves = [(150, sorted(split.split_hash("en", i) for i in range(150))[:50]),
              (150, sorted(split.split_hash("en", i) for i in range(150, 300))[:50])]
    assert tally.merge_smallest(halves) == tally.merge_smallest(reversed(halves)) == (300, list(smallest))


def test_validation_pages_are_each_languages_share_with_one_from_the_minimum_on():
    assert split.MIN_PAGES_FOR_VALIDATION == 20
    assert split.validation_pages(2000, 0.02) == 40
    assert split.validation_pages(30, 0.01) == 1  # 0.3 of a page, raised to one: a language of 30 pages is scored
    assert split.validation_pages(19, 0.01) == 0  # under the minimum: its share only, none
    assert split.validation_pages(10, 0.3) == 3  # ... which a large fraction still gives
    assert split.validation_pages(50, 0.05) == 3  # 2.5 rounds half up
    assert split.validation_pages(10**6, 0.0) == split.validation_pages(30, 0.0) == 0
    smallest = list(range(100, 150))  # a language's 50 smallest split hashes
    assert split.validation_cut(30, smallest[:30], 0.02) == 101  # hash 100 only
    assert split.validation_cut(2000, smallest, 0.02) == 140  # the 40 smallest
    assert split.validation_cut(10, smallest[:10], 0.02) == 0
    assert split.validation_cut(10**6, smallest, 0.005) == int(0.005 * 2**64)  # 5000 pages: the hash threshold


def test_past_the_exact_bottom_k_a_language_holds_out_about_its_share():
    # 3000 pages at 2%: 60 > EXACT_VALIDATION_PAGES, so every page whose split hash is under 2%
    # of the range; a binomial count of mean 60 and standard deviation ~7.7.
    hashes = sorted(split.split_hash("de", i) for i in range(3000))
    cut = split.validation_cut(3000, hashes[: split.EXACT_VALIDATION_PAGES], 0.02)
    held = sum(split.split_of("de", i, {"de": cut}) == "validation" for i in range(3000))
    assert held == sum(h < cut for h in hashes) and 60 - 25 <= held <= 60 + 25
    assert all(split.split_of("en", i, {"de": cut}) == "train" for i in range(50))


def test_language_weights_follow_exponential_smoothing_and_keep_the_total():
    counts = {"en": 900, "sw": 100}
    w = job.language_weights(counts, 0.7)
    total = sum(counts[l] * w[l] for l in counts)
    assert total == pytest.approx(1000)
    p_en = 0.9**0.7 / (0.9**0.7 + 0.1**0.7)
    assert counts["en"] * w["en"] / total == pytest.approx(p_en)
    assert w["en"] < 1 < w["sw"]  # big language subsampled, small one repeated
    assert job.language_weights({"en": 5}, 0.7) == {"en": pytest.approx(1.0)}


def test_shard_counts_follow_data_size():
    assert job.shard_counts({"train": 10, "validation": 0}, 4) == {"train": 3, "validation": 1}
    # From the packed sizes before replication: train counts each language's expected copies.
    key, size = job.SplitLang, job.Size
    sizes = {key("train", "en"): size(90, 900), key("train", "sw"): size(10, 100), key("validation", "sw"): size(1, 35)}
    plan = job.sizing(sizes, 0.5, 100)
    w = job.language_weights({"en": 90, "sw": 10}, 0.5)
    assert plan.weights == w
    assert plan.shards == {"train": math.ceil((900 * w["en"] + 100 * w["sw"]) / 100), "validation": 1}
    assert plan.shards["train"] == 10  # the total is kept: 1000 codepoints expected
    assert job.sizing(dict(reversed(sizes.items())), 0.5, 100) == plan  # arrival order does not matter
    assert job.shard_name("train", 3, 12) == "train/part-00003-of-00012.parquet"


def _counters(result) -> dict:
    found = result.metrics().query(MetricsFilter().with_namespace(job._NS))["counters"]
    return {c.key.metric.name: c.committed for c in found}


def test_read_and_clean_tallies_each_item_and_replays_a_finished_item(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(['{"id": 2, "title": "B", "text": "Second page.", "lang": "en"}', "{not json",
                               '{"id": 1, "title": "A", "text": "First page.", "lang": "en"}',
                               '{"id": 4, "title": "E", "text": "  ", "lang": "en"}']) + "\n")
    items, staging = plan_work_items([str(rows)]), str(tmp_path / "staging")
    url = itemcache.cache_url(staging, items[0])
    outcomes = dict.fromkeys(schema.PAGE_OUTCOMES, 0) | {"kept": 2, "parse_errors": 1, "empty": 1}
    for run, counter in (("parsed", "items_parsed"), ("replayed", "items_reused")):
        p = TestPipeline(options=_opts())
        out = p | job.ReadAndClean(items, staging, PreprocessConfig())
        assert_that(out | beam.Map(lambda t: (t.item, t.lang, dict(zip(schema.PAGE_OUTCOMES, t.outcomes)), t.rejects)),
                    equal_to([(url, "en", outcomes, 2)]))
        result = p.run()
        result.wait_until_finish()
        assert _counters(result) == {counter: 1, "kept": 2, "parse_errors": 1, "empty": 1}, run
        # The finished item is cached in staging: the second run must replay it, not read the changed file.
        assert [f.name for f in (tmp_path / "staging" / "items").iterdir()] == [url.rsplit("/", 1)[1]]
        assert list(itemcache.kept_pages(url)) == [("en", 2, "Second page."), ("en", 1, "First page.")]
        assert list(itemcache.kept_sizes(url)) == [("en", 2, 12), ("en", 1, 11)]  # codepoints, as len()
        assert [(r.page_id, r.source.rsplit(":", 1)[1], r.outcome, r.reason) for r in itemcache.rejects([url], "en")] == [
            (-1, "2", "parse_errors", "parse error: invalid JSON at line 2, column 2: "
                                      "Expecting property name enclosed in double quotes"),
            (4, "4", "empty", "empty after cleaning")]
        rows.write_text('{"id": 9, "title": "Z", "text": "Changed.", "lang": "en"}\n')


def _tallies(pages, items):
    """LangTally of `pages` ((lang, page id)) spread round-robin over `items` items."""
    out = []
    for i in range(items):
        by_lang = {}
        for lang, page_id in pages[i::items]:
            by_lang.setdefault(lang, tally.Tally()).add(itemcache.clean_raw(raw(page_id, "Some text.", lang=lang)))
        out += [t.done(f"item{i}", lang) for lang, t in by_lang.items()]
    return out


def test_validation_cuts_hold_out_each_languages_share_whatever_the_items_and_bundling():
    """One large language, one small, one under the minimum: the held-out pages of each are
    those with the smallest split hashes, as many as its share, however the pages were spread
    over work items."""
    sizes = {"en": 1000, "bg": 30, "xx": 19}
    pages = [(lang, i) for lang, n in sizes.items() for i in range(n)]

    def smallest(lang, k):
        return sorted((p for p in pages if p[0] == lang), key=lambda p: split.split_hash(*p))[:k]

    # 1% of 1000 is 10; bg's 0.3 of a page is raised to one; xx (19 pages, under the minimum) gets none.
    held = set(smallest("en", 10) + smallest("bg", 1))

    def check(outputs):
        [kept_and_cuts] = outputs
        assert {lang: kept for lang, (kept, _) in kept_and_cuts.items()} == sizes
        cuts = split.cuts_of(kept_and_cuts)
        assert {p for p in pages if split.split_of(*p, cuts) == "validation"} == held

    with TestPipeline(options=_opts()) as p:
        for n in (1, 3, 7):
            tallies = p | f"Tallies{n}" >> beam.Create(_tallies(pages, n)) | f"Shuffle{n}" >> beam.Reshuffle()
            assert_that(tallies | f"Cuts{n}" >> job.ValidationCuts(0.01), check, label=f"Check{n}")


def test_the_tokenizer_bound_keeps_the_k_smallest_training_pages():
    kept_and_cuts = {"en": (100_000, 0), "de": (20_000, 0)}
    k = 5000
    bound = tokenizer_sample.bound(kept_and_cuts, 0.005, k)
    ranks = sorted(stable_int("tok", lang, i) for lang, (n, _) in kept_and_cuts.items() for i in range(n))
    below = sum(r < bound for r in ranks)
    assert k < below < 1.3 * k  # all k, and not the whole input: about k plus a margin
    assert tokenizer_sample.bound({"en": (4000, 0)}, 0.005, k) == 1 << 64  # fewer pages than k: all of them
    # A validation fraction of 0.9 leaves 1/10 of the pages to train on: the bound widens with it.
    assert tokenizer_sample.bound(kept_and_cuts, 0.9, k) > 8 * bound


def test_the_tokenizer_plan_takes_the_first_k_keys_with_their_ties_in_chunks(monkeypatch):
    monkeypatch.setattr(tokenizer_sample, "CHUNK_CHARACTERS", 10)
    candidates = [(5, 1, 4), (3, 2, 4), (3, 2, 9), (9, 3, 4), (1, 4, 8), (7, 5, 4)]  # (3, 2): a page id given twice
    plan = tokenizer_sample.plan(candidates, 4, 1 << 64)
    assert plan.k == 4 and plan.uppers == ((3, 2), (5, 1))  # (1, 4) + both (3, 2): 21 chars, then (5, 1)
    assert [plan.chunk_of(r, i) for r, i, _ in candidates] == [1, 0, 0, None, 0, None]
    assert tokenizer_sample.plan(candidates, 10, 1 << 64).uppers[-1] == (9, 3)  # fewer than k: all of them
    # the k-th key given twice: both pages come along, chunks never split a key (the trainer takes k by text)
    assert tokenizer_sample.plan(candidates, 2, 1 << 64).uppers == ((3, 2),)
    with pytest.raises(RuntimeError, match="bound"):
        tokenizer_sample.plan(candidates, 10, 1 << 60)  # fewer than k under a bound: refused, never a smaller sample


def _sample_refs(tmp_path, rows_by_item, plan):
    refs = []
    for i, rows in enumerate(rows_by_item):
        by_chunk = {}
        for rank, page_id, text in rows:
            if (chunk := plan.chunk_of(rank, page_id)) is not None:
                by_chunk.setdefault(chunk, []).append((rank, page_id, text))
        tables = {c: tokenizer_sample.table(r) for c, r in by_chunk.items()}
        refs += spill.write_buckets(str(tmp_path / f"tok{i}.arrow"), tables)
    return refs


def test_train_tokenizer_learns_from_the_bottom_k_training_pages_only(tmp_path, monkeypatch):
    monkeypatch.setattr(tokenizer_sample, "CHUNK_CHARACTERS", 50)  # a chunk a page or two
    words = {1: "zebra", 2: "yak", 3: "walrus", 4: "vole", 6: "otter"}
    rows = [(stable_int("tok", "en", i), i, " ".join([w] * 20)) for i, w in words.items()]
    bottom = sorted(rows)[:2]
    expected = {words[i] for _, i, _ in bottom}
    assert len(expected) == 2
    plan = tokenizer_sample.plan([(r, i, len(t)) for r, i, t in rows], 2, 1 << 64)
    refs = _sample_refs(tmp_path, [rows[:2], rows[2:]], plan)
    assert list(tokenizer_sample.Texts(refs, plan)) == [t for _, _, t in bottom]  # in rank order, twice over
    assert list(tokenizer_sample.Texts(refs, plan)) == [t for _, _, t in bottom]
    assert plan.whole()

    def in_vocab(outputs):
        [tokenizer_json] = outputs
        vocab = json.loads(tokenizer_json)["model"]["vocab"]
        assert {w for w in words.values() if w in vocab} == expected
        assert tokenizer_json == train_wordpiece([t for _, _, t in bottom], vocab_size=120).to_str()

    with TestPipeline(options=_opts()) as p:
        sample, plan_ = p | "Refs" >> beam.Create(refs), p | "Plan" >> beam.Create([plan])
        assert_that(sample | "Train" >> job.TrainTokenizer(PreprocessConfig(tokenizer_pages=2, vocab_size=120), None, plan_),
                    in_vocab, label="Trained")
        assert_that(sample | "Given" >> job.TrainTokenizer(PreprocessConfig(), '{"given": 1}', plan_),
                    equal_to(['{"given": 1}']), label="Given")
        # the alphabet as ScatterPages passes it on, an item's at a time: the same vocabulary, one read
        alphabets = p | "Alphabets" >> beam.Create(_alphabets([rows[:2], rows[2:]], plan))
        assert_that(sample | "WithAlphabets" >> job.TrainTokenizer(
            PreprocessConfig(tokenizer_pages=2, vocab_size=120), None, plan_, None, alphabets), in_vocab, label="Alphabets")
        # as the job trains it: one unit of work of the sampling step, beside its pack groups
        cfg = PreprocessConfig(tokenizer_pages=2, vocab_size=120)
        unit = sample | "AsUnit" >> job.TrainTokenizer(cfg, None, plan_, None, alphabets, as_unit=True)
        none = p | "NoFiles" >> beam.Create([])
        *_, beside = none | job.SampleLanguages(cfg, p | "NoSizes" >> beam.Create([]), None, unit, shares=2)
        assert_that(beside, in_vocab, label="Beside")


def _alphabets(rows_by_item, plan):
    """Each item's alphabet of its sample pages, as ScatterPages tags it."""
    return [alphabet_of(t for r, i, t in rows if plan.chunk_of(r, i) is not None).astype("<u4").tobytes()
            for rows in rows_by_item]


def test_pages_past_the_kth_keep_their_characters_out_of_the_vocabulary(tmp_path):
    """A page id given twice at the k-th key: both pages are in the chunks, the trainer reads the
    first k by text, so the items' alphabets (of every page in the chunks) are not the sample's:
    the trainer finds its alphabet from what it reads."""
    rank = stable_int("tok", "en", 3)
    rows = [(rank - 5, 1, " ".join(["zebra"] * 20)), (rank, 3, " ".join(["walrus"] * 20)),
            (rank, 3, " ".join(["ωmega"] * 20))]  # "walrus" < "ωmega": the second is past k = 2
    plan = tokenizer_sample.plan([(r, i, len(t)) for r, i, t in rows], 2, 1 << 64)
    assert plan.pages == 3 and not plan.whole()
    refs = _sample_refs(tmp_path, [rows], plan)
    alphabets = _alphabets([rows], plan)
    assert ord("ω") in np.frombuffer(alphabets[0], "<u4")
    got = job._train_tokenizer(refs, plan, 120, None, alphabets)
    assert got == train_wordpiece([rows[0][2], rows[1][2]], vocab_size=120).to_str()
    assert "ω" not in json.loads(got)["model"]["vocab"]


def _page_refs(tmp_path, pages_by_item, groups):
    """((split, lang, page id, text), ...) per item -> (PackGroup, Ref) as ScatterPages makes them."""
    refs = []
    for i, pages in enumerate(pages_by_item):
        by_group = {}
        for split, lang, page_id, text in pages:
            key = PackGroup(split, lang, stable_int("group", lang, page_id) % groups)
            by_group.setdefault(key, []).append((lang, page_id, text))
        tables = {k: spill.pages_table(*zip(*v)) for k, v in by_group.items()}
        refs += spill.write_buckets(str(tmp_path / f"pages{i}.arrow"), tables)
    return refs


def test_pack_examples_packs_each_language_and_split_apart_in_page_id_order(tmp_path):
    pages = [[("train", "en", 3, "gamma delta"), ("validation", "en", 2, "held out")],
             [("train", "de", 1, "eins zwei"), ("train", "en", 1, "alpha beta")]]
    refs = _page_refs(tmp_path, pages, 1)

    def readable(packed):
        rows = []
        for lang, copy, ex in (x for t in spill.read_whole(packed.url) for x in spill.table_examples(t)):
            text = codepoints_to_text(ex.codepoints)
            assert text[0] == chr(schema.CLS) and text[-1] == chr(schema.SEP) and not ex.segment_ids.any()
            rows.append((packed.split, lang, tuple(ex.page_ids), text[1:-1], ex.part, ex.sop_label, copy))
        return rows

    staging = str(tmp_path / "staging")
    with TestPipeline(options=_opts()) as p:
        files, sizes = p | beam.Create(refs) | job.PackExamples(PreprocessConfig(seq_len=64), staging)
        assert_that(files | beam.FlatMap(readable), equal_to([
            ("train", "en", (1, 3), "alpha beta\ngamma delta", 0, schema.SOP_NO_PAIR, 0),
            ("validation", "en", (2,), "held out", 0, schema.SOP_NO_PAIR, 0),
            ("train", "de", (1,), "eins zwei", 0, schema.SOP_NO_PAIR, 0),
        ]), label="Examples")
        assert_that(sizes, equal_to([(SplitLang("train", "en"), Size(1, 24)), (SplitLang("validation", "en"), Size(1, 10)),
                                     (SplitLang("train", "de"), Size(1, 11))]), label="Sizes")


def test_spilled_examples_come_back_as_they_were(tmp_path):
    exs = pack_pages([(i, f"page {i} with some words") for i in range(20)], 16, sentence_order=True, seed=3)
    rows = [("en", c, ex) for c in (0, 2) for ex in exs]
    refs = spill.write_buckets(str(tmp_path / "x.arrow"), {"b": spill.examples_table(rows[5:]),
                                                             "a": spill.examples_table(rows[:5]),
                                                             "empty": spill.examples_table([])})
    assert [(key, ref.row_group, ref.rows) for key, ref in refs] == [("a", 0, 5), ("b", 1, len(rows) - 5)]
    back = [r for t in spill.read_buckets([ref for _, ref in refs]) for r in spill.table_examples(t)]
    for (lang, copy, ex), (lang2, copy2, ex2) in zip(rows, back, strict=True):
        assert (lang, copy, ex.page_ids, ex.sop_label, ex.part) == (lang2, copy2, ex2.page_ids, ex2.sop_label, ex2.part)
        assert ex2.codepoints.dtype == np.int32 and ex2.segment_ids.dtype == np.int8
        assert np.array_equal(ex.codepoints, ex2.codepoints) and np.array_equal(ex.segment_ids, ex2.segment_ids)
    assert spill.write_buckets(str(tmp_path / "none.arrow"), {}) == [] and not (tmp_path / "none.arrow").exists()


def test_a_spill_file_reads_back_only_the_columns_asked(tmp_path):
    rows = [("en", 0, ex) for ex in pack_pages([(i, f"page {i} with some words") for i in range(9)], 16)]
    refs = [ref for _, ref in spill.write_buckets(str(tmp_path / "x.arrow"), {"k": spill.examples_table(rows)})]
    (narrow,) = spill.read_buckets(refs, columns=["part", "lang"])
    assert narrow.column_names == ["part", "lang"] and narrow.column("lang").to_pylist() == ["en"] * len(rows)
    whole = spill.table_examples(next(spill.read_whole(str(tmp_path / "x.arrow"))))
    assert [ex.page_ids for _, _, ex in whole] == [ex.page_ids for _, _, ex in rows]
    with pytest.raises(KeyError, match=r"x\.arrow: no column text \(it has lang, copy"):
        next(spill.read_buckets(refs, columns=["lang", "text"]))


def test_a_keys_rows_span_row_groups_of_at_most_bucket_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(spill, "BUCKET_ROWS", 2)
    rows = [("en", 0, ex) for ex in pack_pages([(i, f"page {i} with some words") for i in range(9)], 16)]
    refs = spill.write_buckets(str(tmp_path / "x.arrow"), {"k": spill.examples_table(rows), "j": spill.examples_table(rows[:3])})
    assert [(key, ref.row_group, ref.rows) for key, ref in refs][:3] == [("j", 0, 2), ("j", 1, 1), ("k", 2, 2)]
    assert sum(ref.rows for key, ref in refs if key == "k") == len(rows)
    back = [r for t in spill.read_buckets([ref for key, ref in refs if key == "k"]) for r in spill.table_examples(t)]
    assert [ex.page_ids for _, _, ex in back] == [ex.page_ids for _, _, ex in rows]


def test_sample_languages_repeats_small_languages_with_new_copies(tmp_path):
    def ex(first, part=0):
        return PackedExample([first], np.zeros(3, np.int32), np.zeros(3, np.int8), -1, part)

    files = []
    for split, lang, firsts in (("train", "en", range(90)), ("train", "sw", range(10)), ("validation", "sw", [1000])):
        url = str(tmp_path / "packed" / f"{split}-{lang}-00000.arrow")
        spill.write_whole(url, spill.examples_table([(lang, 0, ex(i)) for i in firsts]))
        files.append(PackedFile(split, lang, url))
    sizes = [(SplitLang("train", "en"), Size(90, 270)), (SplitLang("train", "sw"), Size(10, 30)),
             (SplitLang("validation", "sw"), Size(1, 3))]
    cfg = PreprocessConfig(alpha=0.5, shard_codepoints=100)
    w = job.language_weights({"en": 90, "sw": 10}, 0.5)

    def check(rows):
        d = dict(rows)
        assert d[("validation", "sw")] == 1
        assert abs(d[("train", "sw")] - 10 * w["sw"]) <= 3
        assert abs(d[("train", "en")] - 90 * w["en"]) <= 6

    with TestPipeline(options=_opts()) as p:
        refs, copies, sizing, _ = (p | "Files" >> beam.Create(files)
                                | job.SampleLanguages(cfg, p | "Sizes" >> beam.Create(sizes)))
        counts = (refs | beam.FlatMap(lambda kv: [(kv[0].split, lang) for lang, _, _ in
                                                  spill.table_examples(next(spill.read_buckets([kv[1]])))])
                  | beam.combiners.Count.PerElement())
        assert_that(counts, check, label="Copies")
        assert_that(sizing | beam.Map(lambda s: s.shards), equal_to([{"train": 3, "validation": 1}]), label="Shards")
        assert_that(copies | beam.CombinePerKey(sum) | beam.Map(lambda kv: kv[0]), equal_to(["en", "sw"]), label="Langs")


def test_deal_gives_the_vocabulary_a_share_of_its_own_where_it_outweighs_the_sampling():
    """SampleLanguages' units into a share per worker of Beam's local runner (job.deal): the
    largest first, each to the share with the least work; the same shares whatever order the
    units came in."""
    plan = tokenizer_sample.Plan(10, ((1, 1),), 10, characters=200_000_000)
    vocabulary = Vocabulary([], plan, None)
    files = [PackedFile("train", "en", f"/s/packed/train-en-{g:05d}.arrow", 20_000) for g in range(8)]
    assert job.cost(vocabulary) > sum(map(job.cost, files))  # 12 s of training, 9.6 of sampling

    def shares(dealt):
        out = {}
        for share, (position, unit) in dealt:
            out.setdefault(share, []).append((position, unit))
        return [[u for _, u in sorted(units, key=lambda pu: pu[0])] for _, units in sorted(out.items())]

    assert shares(job.deal(files, [vocabulary], 2)) == [[vocabulary], files]
    assert job.deal(files[::-1], [vocabulary], 2) == job.deal(files, [vocabulary], 2)
    # three workers: the sampling split between the two others, its largest first
    big = files[:2] + [f._replace(examples=60_000) for f in files[2:4]]
    assert shares(job.deal(big, [vocabulary], 3)) == [[vocabulary], [big[2], big[0]], [big[3], big[1]]]
    # a big input: the vocabulary's worker samples too, the work even across the shares
    many = [PackedFile("train", "en", f"/s/packed/train-en-{g:05d}.arrow", 20_000) for g in range(80)]
    loads = [sum(map(job.cost, share)) for share in shares(job.deal(many, [vocabulary], 2))]
    assert abs(loads[0] - loads[1]) <= job.cost(files[0]) and vocabulary in shares(job.deal(many, [vocabulary], 2))[0]
    # a runner that hands out work as workers free up: a key a unit, the vocabulary first
    assert job.deal(files, [vocabulary], None)[:2] == [(0, (0, vocabulary)), (1, (0, files[0]))]
    assert len({share for share, _ in job.deal(files, [vocabulary], None)}) == 9
    assert shares(job.deal(files, [], 2)) == [files[0::2], files[1::2]]


def test_write_shards_puts_each_example_in_its_hashed_shard_in_hashed_order(tmp_path):
    texts = [f"page {i} says alpha beta gamma" for i in range(8)]
    exs = pack_pages([(i, t) for i, t in enumerate(texts)], 16)
    sampled = [("train", "en", ex, copy) for ex in exs for copy in (0, 1)] + [("validation", "sw", exs[0], 0)]
    shards_of = {"train": 2, "validation": 1}
    by_key = {}
    for split, lang, ex, copy in sampled:
        total = shards_of[split]
        key = ShardKey(split, stable_int("shard", example_id(lang, ex, copy)) % total, total)
        by_key.setdefault(key, []).append((lang, copy, ex))
    # two producers (pack groups) per shard, as SampleLanguages leaves them
    refs = []
    for i in (0, 1):
        refs += spill.write_buckets(str(tmp_path / f"sampled{i}.arrow"),
                                    {k: spill.examples_table(v[i::2]) for k, v in by_key.items()})
    tokenizer_json = train_wordpiece(texts, vocab_size=100).to_str()
    staging = str(tmp_path)
    with TestPipeline(options=_opts()) as p:
        tok = p | "Tokenizer" >> beam.Create([tokenizer_json])
        written = p | "Refs" >> beam.Create(refs) | job.WriteShards(PreprocessConfig(), staging, tok)
        records = written.shards
        # one MaskHistograms per (shard, language): en in both train shards, sw in validation; one
        # share per example written, and the masked spans counted
        assert_that(written.masks | beam.Map(lambda m: (m.lang, sum(m.share.values()))) | beam.CombinePerKey(sum),
                    equal_to([("en", 2 * len(exs)), ("sw", 1)]), label="MaskExamples")
        assert_that(records | beam.Map(lambda r: (r.split, r.path)), equal_to([
            ("train", "train/part-00000-of-00002.parquet"), ("train", "train/part-00001-of-00002.parquet"),
            ("validation", "validation/part-00000-of-00001.parquet")]))
        assert_that(records | beam.Map(lambda r: r.rows) | beam.CombineGlobally(sum), equal_to([len(sampled)]),
                    label="Rows")
        # What the manifest records of each shard is what is on disk.
        assert_that(records | beam.Map(lambda r: r.sha256 == hashlib.sha256((tmp_path / r.path).read_bytes()).hexdigest()),
                    equal_to([True] * 3), label="Sha256")
    for key, rows in by_key.items():
        ids = [example_id(lang, ex, copy) for lang, copy, ex in rows]
        written = pq.read_table(tmp_path / job.shard_name(*key)).column("example_id").to_pylist()
        assert written == sorted(ids, key=lambda i: (stable_int("order", i), i)), key


def test_write_rejects_writes_one_sorted_file_per_language(tmp_path):
    lines = ['{"id": 7, "title": "T7", "text": " ", "lang": "en"}', "{bad", '{"id": 3, "title": "T3", "text": "", "lang": "de"}',
             '{"id": 2, "title": "T2", "text": "\\t", "lang": "en"}', '{"id": 1, "title": "T1", "text": "Kept.", "lang": "en"}']
    tallies = []
    for name, part in (("a", lines[:2]), ("b", lines[2:])):
        (tmp_path / f"{name}.jsonl").write_text("\n".join(part) + "\n")
        [item] = plan_work_items([str(tmp_path / f"{name}.jsonl")], lang="en")
        url = itemcache.cache_url(str(tmp_path / "staging"), item)
        by_lang = {}
        for c in itemcache.parse_and_store(item, url):
            by_lang.setdefault(c.lang, tally.Tally()).add(c)
        tallies += [t.done(url, lang) for lang, t in by_lang.items()]
    with TestPipeline(options=_opts()) as p:
        assert_that(p | beam.Create(tallies) | job.WriteRejects(str(tmp_path)),
                    equal_to([f"{schema.REJECTS}/de.jsonl", f"{schema.REJECTS}/en.jsonl"]))
    folder = tmp_path / schema.REJECTS
    assert sorted(f.name for f in folder.iterdir()) == ["de.jsonl", "en.jsonl"]
    en = [json.loads(line) for line in (folder / "en.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(r["page_id"], r["outcome"]) for r in en] == [(-1, "parse_errors"), (2, "empty"), (7, "empty")]
    assert json.loads((folder / "de.jsonl").read_text(encoding="utf-8"))["page_id"] == 3


def _headings(variants, end_matter, last, converted=0):
    h = tally.Headings()
    h.add(variants, end_matter, last, converted)
    return h.values()


def _lang_tally(lang, outcomes=None, replaced=0, dropped=(), headings=None):
    counts = tuple((outcomes or {}).get(o, 0) for o in schema.PAGE_OUTCOMES)
    return tally.LangTally("item", lang, counts, replaced, tuple(dropped), headings or tally.Headings().values(), (), 0)


def test_collect_stats_writes_every_count_as_one_sorted_json_file(tmp_path):
    n = len(schema.CONSTRUCT_DROPS)
    tallies = [
        _lang_tally("en", {"kept": 1}, 2, (1,) + (0,) * (n - 1), _headings(2, ("References", "Notes"), "History")),
        _lang_tally("en", {"kept": 1, "redirects": 1}, 3, (1,) * n,
                    tally.Headings(_headings(0, ("References",), "History")).merge(_headings(0, (), "Life")).values()),
        _lang_tally("sw", {"empty": 1}),
    ]
    with TestPipeline(options=_opts()) as p:
        inputs = stats.StatsInputs(
            tallies=p | "Tallies" >> beam.Create(tallies),
            examples=p | "Examples" >> beam.Create([("en", 1), ("en", 1), ("sw", 1)]),
            weights=p | "Weights" >> beam.Create([{"en": 0.5, "sw": 2.0}]),
            validation=p | "Validation" >> beam.Create([("sw", 2), ("en", 1)]),
            masks=p | "Masks" >> beam.Create([MaskHistograms("en", {100: 1, 150: 3}, {5: 2}),
                                              MaskHistograms("en", {150: 1, 40: 1}, {5: 1, 9: 1, 20: 1})]),
        )
        path = inputs | stats.CollectStats(str(tmp_path))
        assert_that(path, equal_to([f"{tmp_path}/stats.json"]))
    assert json.loads((tmp_path / "stats.json").read_text(encoding="utf-8")) == [
        ["dropped", "en", [2] + [1] * (n - 1)],
        ["examples", "en", 2], ["examples", "sw", 1],
        ["masks", "en", {"examples": 6, "masked_share_p10_pct": 4.0, "masked_share_median_pct": 15.0, "spans": 5,
                         "span_median": 5, "span_p90": 20, "span_max": 20}],
        ["outcome", "en", "kept", 2], ["outcome", "en", "redirects", 1], ["outcome", "sw", "empty", 1],
        ["replaced", "en", 5],
        ["text", "en", {"variant_pages": 1, "variant_constructs": 2, "end_matter_dropped": [["References", 2], ["Notes", 1]],
                        "last_headings_kept": [["History", 2], ["Life", 1]]}],
        ["validation_pages", "en", 1], ["validation_pages", "sw", 2],
        ["weight", "en", 0.5], ["weight", "sw", 2.0],
    ]


def test_a_shard_read_in_passes_is_the_shard_read_whole(tmp_path, monkeypatch):
    # WriteShards reads a shard's examples a pass of record batches at a time (job._PASS_CODEPOINTS);
    # the file must not depend on how many passes it took, nor on a batch read twice.
    texts = [f"page {i} says alpha beta gamma delta" for i in range(1300)]
    exs = pack_pages([(i, t) for i, t in enumerate(texts)], 24)
    rows = [("en" if i % 3 else "sw", i % 2, ex) for i, ex in enumerate(exs)]
    refs = []
    for i in range(3):  # three producers (pack groups) of one shard
        refs += [ref for _, ref in spill.write_buckets(str(tmp_path / f"sampled{i}.arrow"),
                                                       {"k": spill.examples_table(rows[i::3])})]
    refs.append(refs[0])  # a duplicated reference is read as often as it is named
    tokenizer_json = train_wordpiece(texts[:50], vocab_size=100).to_str()
    key = ShardKey("train", 0, 1)
    written = {}
    for name, pass_codepoints in (("whole", 10**12), ("passes", 1)):
        monkeypatch.setattr(job, "_PASS_CODEPOINTS", pass_codepoints)
        staging = tmp_path / name
        record, *masks = job._PlanAndWriteFn(PreprocessConfig(), str(staging)).process((key, refs), tokenizer_json)
        written[name] = ((staging / record.path).read_bytes(), record, [m.value for m in masks])
    assert len(exs) + len(rows[0::3]) > 2 * 1024 and spill.write_buckets(str(tmp_path / "probe.arrow"), {"k": spill.examples_table(rows[0::3])})[-1][1].row_group == 0
    assert written["whole"] == written["passes"]
    assert written["whole"][1].rows == len(exs) + len(rows[0::3])


def test_work_items_are_ordered_so_the_local_runners_round_robin_gives_even_shares():
    """The planner's items of benchmarks/phases.py's 1 GB input (MB of XML: a file an item but for
    en's, cut at 64 MiB): dealt round robin (what Beam's local runner does with a stage's input,
    per worker), each worker's bytes are within 2% of an even share (in the planner's order, by
    path, one worker has 10% of the input more than the other), and each worker reads its largest
    items first."""
    from pipeline.sources import WorkItem

    mb = {"ar": 42.3, "bn": 8.2, "el": 11.8, "hi": 6.0, "hy": 8.2, "ja": 94.0, "kn": 1.4, "ko": 21.1, "mr": 1.9,
          "ru": 129.2, "uk": 54.0, "vi": 37.6, "zh": 68.1}
    items = [WorkItem(f"/in/{lang}.xml", "xml") for lang in mb]
    items += [WorkItem("/in/en.xml", "xml", start=i * 67_108_864, end=(i + 1) * 67_108_864) for i in range(7)]
    items.append(WorkItem("/in/en.xml", "xml", start=7 * 67_108_864))  # the last piece, to the file's end
    sizes = {f"/in/{lang}.xml": int(v * 1e6) for lang, v in mb.items()} | {"/in/en.xml": 7 * 67_108_864 + 48_000_000}
    size = lambda it: (it.end if it.end is not None else sizes[it.path]) - it.start
    total = sum(map(size, items))
    for workers in (1, 2, 3, 4):
        order = job.even_shares(items, sizes, workers)
        assert sorted(order, key=lambda it: (it.path, it.start)) == sorted(items, key=lambda it: (it.path, it.start))
        shares = [order[w::workers] for w in range(workers)]
        loads = [sum(map(size, share)) for share in shares]
        assert max(loads) - min(loads) <= 0.02 * total, (workers, loads)
        assert max(map(len, shares)) - min(map(len, shares)) <= 1
        for share in shares:
            assert [size(it) for it in share] == sorted((size(it) for it in share), reverse=True)
    planned = sorted(items, key=lambda it: (it.path, it.start))  # plan_work_items' order
    plan_order = [sum(map(size, planned[w::2])) for w in range(2)]
    assert max(plan_order) - min(plan_order) > 0.1 * total  # what the order is for
    assert job.even_shares([], sizes, 2) == []
