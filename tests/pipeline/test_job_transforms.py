"""Each composite of pipeline/job.py on its own, with TestPipeline (Beam's own habit): Create -> the
transform -> assert_that; the reader and the writers on files in tmp_path, nothing else."""

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
from pipeline import itemcache, job, stats
from pipeline.preprocess_config import PreprocessConfig
from pipeline.examples import codepoints_to_text, example_id, pack_pages
from pipeline.hashing import stable_int
from pipeline.sources import RawPage, plan_work_items
from pipeline.tokenizer import train_wordpiece


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
            equal_to([job.Outcome("en", o) for o in ("kept", "redirects", "non_article", "parse_errors", "empty", "kept")]),
            label="Outcomes",
        )
        assert_that(out.kept | beam.Map(lambda p: p.page_id), equal_to([1, 6]), label="Kept")
        assert_that(out.rejects | beam.Map(lambda r: (r.page_id, r.outcome)),
                    equal_to([(4, "parse_errors"), (5, "empty")]), label="Rejects")
        assert_that(out.replaced, equal_to([job.Replaced("en", 1)]), label="Replaced")
        # equal_to would take plain tuples too: each output is its named type
        for tag, cls in (("kept", job.Page), ("outcomes", job.Outcome), ("replaced", job.Replaced), ("rejects", job.Reject)):
            assert_that(getattr(out, tag) | f"Is{cls.__name__}" >> beam.Map(isinstance, cls)
                        | f"All{cls.__name__}" >> beam.CombineGlobally(all), equal_to([True]), label=f"Type{cls.__name__}")


def test_clean_pages_counts_what_kept_pages_lost_and_follows_the_config():
    pages = [raw(1, "Text.{{Infobox x}}\n{|\n| a\n|}\n== See also ==\n* [[Y]]"), raw(2, "{{Infobox only}}"), raw(3, "Plain.")]
    lost = tuple(int(r in ("infoboxes", "tables", "end_matter")) for r in schema.CONSTRUCT_DROPS)
    with TestPipeline(options=_opts()) as p:
        out = p | beam.Create(pages) | job.CleanPages()
        assert_that(out.dropped, equal_to([job.Dropped("en", lost)]), label="Dropped")  # kept pages only
        assert_that(out.kept | beam.Map(lambda p: p.text), equal_to(["Text.", "Plain."]), label="Kept")
    with TestPipeline(options=_opts()) as p:
        out = p | beam.Create(pages[:1]) | job.CleanPages(PreprocessConfig(keep_tables=True, keep_end_matter=True))
        assert_that(out.kept | beam.Map(lambda p: p.text), equal_to(["Text.\na\nSee also\nY"]), label="KeptAll")


def test_validation_pages_are_each_languages_share_with_one_from_the_minimum_on():
    assert job.MIN_PAGES_FOR_VALIDATION == 20
    assert job.validation_pages(2000, 0.02) == 40
    assert job.validation_pages(30, 0.01) == 1  # 0.3 of a page, raised to one: a language of 30 pages is scored
    assert job.validation_pages(19, 0.01) == 0  # under the minimum: its share only, none
    assert job.validation_pages(10, 0.3) == 3  # ... which a large fraction still gives
    assert job.validation_pages(50, 0.05) == 3  # 2.5 rounds half up
    assert job.validation_pages(10**6, 0.0) == job.validation_pages(30, 0.0) == 0
    smallest = list(range(100, 150))  # a language's 50 smallest split hashes
    assert job.validation_cut(30, smallest[:30], 0.02) == 101  # hash 100 only
    assert job.validation_cut(2000, smallest, 0.02) == 140  # the 40 smallest
    assert job.validation_cut(10, smallest[:10], 0.02) == 0
    assert job.validation_cut(10**6, smallest, 0.005) == int(0.005 * 2**64)  # 5000 pages: the hash threshold


def test_past_the_exact_bottom_k_a_language_holds_out_about_its_share():
    # 3000 pages at 2%: 60 > EXACT_VALIDATION_PAGES, so every page whose split hash is under 2%
    # of the range; a binomial count of mean 60 and standard deviation ~7.7.
    hashes = sorted(job.split_hash("de", i) for i in range(3000))
    cut = job.validation_cut(3000, hashes[: job.EXACT_VALIDATION_PAGES], 0.02)
    pages = [job.Page("de", i, "x") for i in range(3000)]
    held = sum(job.split_of(p, {"de": cut}) == "validation" for p in pages)
    assert held == sum(h < cut for h in hashes) and 60 - 25 <= held <= 60 + 25
    assert all(job.split_of(p, {"de": cut}) == "train" for p in [job.Page("en", i, "x") for i in range(50)])


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

    packed = [job.Packed("train", "en", ex(i)) for i in range(90)] + [job.Packed("train", "sw", ex(i)) for i in range(10)]
    packed += [job.Packed("validation", "sw", ex(1000))]
    cfg = PreprocessConfig(alpha=0.5)
    with TestPipeline(options=_opts()) as p:
        sampled, _ = p | beam.Create(packed) | job.SampleLanguages(cfg)
        counts = sampled | beam.Map(lambda s: (s.split, s.lang)) | beam.combiners.Count.PerElement()

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
    key, size = job.SplitLang, job.Size
    sizes = {key("train", "en"): size(90, 900), key("train", "sw"): size(10, 100), key("validation", "sw"): size(1, 35)}
    plan = job.sizing(sizes, 0.5, 100)
    w = job.language_weights({"en": 90, "sw": 10}, 0.5)
    assert plan.weights == w
    assert plan.shards == {"train": math.ceil((900 * w["en"] + 100 * w["sw"]) / 100), "validation": 1}
    assert plan.shards["train"] == 10  # the total is kept: 1000 codepoints expected
    assert job.sizing(dict(reversed(sizes.items())), 0.5, 100) == plan  # arrival order does not matter
    assert job.shard_name("train", 3, 12) == "train/part-00003-of-00012.parquet"


# --- the composites not covered above: reading, splitting, the tokenizer, packing, the writers ---


def _counters(result) -> dict:
    found = result.metrics().query(MetricsFilter().with_namespace(job._NS))["counters"]
    return {c.key.metric.name: c.committed for c in found}


def test_read_and_clean_gives_each_row_an_outcome_and_replays_a_finished_item(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(['{"id": 2, "title": "B", "text": "Second page.", "lang": "en"}', "{not json",
                               '{"id": 1, "title": "A", "text": "First page.", "lang": "en"}',
                               '{"id": 4, "title": "E", "text": "  ", "lang": "en"}']) + "\n")
    items, staging = plan_work_items([str(rows)]), str(tmp_path / "staging")
    for run, counter in (("parsed", "items_parsed"), ("replayed", "items_reused")):
        p = TestPipeline(options=_opts())
        out = p | job.ReadAndClean(items, staging, PreprocessConfig())
        assert_that(out.outcomes, equal_to([job.Outcome("en", o) for o in ("kept", "parse_errors", "kept", "empty")]),
                    label="Outcomes")
        assert_that(out.kept, equal_to([job.Page("en", 1, "First page."), job.Page("en", 2, "Second page.")]), label="Kept")
        assert_that(out.rejects | beam.Map(lambda r: (r.page_id, r.source.rsplit(":", 1)[1], r.outcome, r.reason)),
                    equal_to([(-1, "2", "parse_errors", "parse error: invalid JSON at line 2, column 2: "
                                                        "Expecting property name enclosed in double quotes"),
                              (4, "4", "empty", "empty after cleaning")]), label="Rejects")
        result = p.run()
        result.wait_until_finish()
        assert _counters(result) == {counter: 1, "kept": 2, "parse_errors": 1, "empty": 1}, run
        # The finished item is cached in staging: the second run must replay it, not read the changed file.
        cached = itemcache.cache_url(staging, items[0]).rsplit("/", 1)[1]
        assert [f.name for f in (tmp_path / "staging" / "items").iterdir()] == [cached]
        rows.write_text('{"id": 9, "title": "Z", "text": "Changed.", "lang": "en"}\n')


def test_assign_split_holds_out_each_languages_share_whatever_the_order_and_bundling():
    """One large language, one small, one under the minimum: the held-out pages of each are
    those with the smallest split hashes, as many as its share."""
    sizes = {"en": 1000, "bg": 30, "xx": 19}
    pages = [job.Page(lang, i, "x") for lang, n in sizes.items() for i in range(n)]

    def smallest(lang, k):
        return sorted((p for p in pages if p.lang == lang), key=lambda p: job.split_hash(p.lang, p.page_id))[:k]

    # 1% of 1000 is 10; bg's 0.3 of a page is raised to one; xx (19 pages, under the minimum) gets none.
    held = set(smallest("en", 10) + smallest("bg", 1))
    expected = [job.SplitPage("validation" if p in held else "train", p) for p in pages]
    shuffled = sorted(pages, key=lambda p: stable_int("test order", p.lang, p.page_id))
    with TestPipeline(options=_opts()) as p:
        in_order = p | "InOrder" >> beam.Create(pages) | "SplitInOrder" >> job.AssignSplit(0.01)
        reshuffled = (p | "Shuffled" >> beam.Create(shuffled) | beam.Reshuffle()
                      | "SplitShuffled" >> job.AssignSplit(0.01))
        # Each page exactly once, in its split (train and validation never share one), both ways.
        both = (in_order | "TagInOrder" >> beam.Map(lambda sp: (0, sp)),
                reshuffled | "TagShuffled" >> beam.Map(lambda sp: (1, sp))) | beam.Flatten()
        assert_that(both, equal_to([(run, sp) for run in (0, 1) for sp in expected]))


def test_train_tokenizer_learns_from_the_bottom_k_training_pages_only():
    words = {1: "zebra", 2: "yak", 3: "walrus", 4: "vole", 5: "otter"}
    split_pages = [job.SplitPage("validation" if i == 5 else "train", job.Page("en", i, " ".join([w] * 20)))
                   for i, w in words.items()]
    # The two smallest hashes of the training pages (page 5's is smaller than all but one, but it is held out).
    bottom = sorted((stable_int("tok", "en", i), i) for i in words if i != 5)[:2]
    assert {words[i] for _, i in bottom} == {"walrus", "zebra"}

    def in_vocab(outputs):
        [tokenizer_json] = outputs
        vocab = json.loads(tokenizer_json)["model"]["vocab"]
        assert {w for w in words.values() if w in vocab} == {"walrus", "zebra"}

    with TestPipeline(options=_opts()) as p:
        pages = p | beam.Create(split_pages)
        assert_that(pages | "Train" >> job.TrainTokenizer(PreprocessConfig(tokenizer_pages=2, vocab_size=120), None),
                    in_vocab, label="Trained")
        assert_that(pages | "Given" >> job.TrainTokenizer(PreprocessConfig(), '{"given": 1}'), equal_to(['{"given": 1}']),
                    label="Given")


def test_pack_examples_packs_each_language_and_split_apart_in_page_id_order():
    split_pages = [job.SplitPage("train", job.Page("en", 3, "gamma delta")),
                   job.SplitPage("validation", job.Page("en", 2, "held out")),
                   job.SplitPage("train", job.Page("de", 1, "eins zwei")),
                   job.SplitPage("train", job.Page("en", 1, "alpha beta"))]

    def readable(packed):
        ex = packed.example
        text = codepoints_to_text(ex.codepoints)
        assert text[0] == chr(schema.CLS) and text[-1] == chr(schema.SEP) and not ex.segment_ids.any()
        return packed.split, packed.lang, tuple(ex.page_ids), text[1:-1], ex.part, ex.sop_label

    with TestPipeline(options=_opts()) as p:
        packed = p | beam.Create(split_pages) | job.PackExamples(PreprocessConfig(seq_len=64))
        assert_that(packed | beam.Map(readable), equal_to([
            ("train", "en", (1, 3), "alpha beta\ngamma delta", 0, schema.SOP_NO_PAIR),
            ("validation", "en", (2,), "held out", 0, schema.SOP_NO_PAIR),
            ("train", "de", (1,), "eins zwei", 0, schema.SOP_NO_PAIR),
        ]))


def test_write_shards_puts_each_example_in_its_hashed_shard_in_hashed_order(tmp_path):
    texts = [f"page {i} says alpha beta gamma" for i in range(8)]
    exs = pack_pages([(i, t) for i, t in enumerate(texts)], 16)
    sampled = [job.Sampled("train", "en", ex, copy) for ex in exs for copy in (0, 1)]
    sampled += [job.Sampled("validation", "sw", exs[0], 0)]
    sizing = job.Sizing(weights={"en": 2.0}, shards={"train": 2, "validation": 1})
    tokenizer_json = train_wordpiece(texts, vocab_size=100).to_str()
    staging = str(tmp_path)
    with TestPipeline(options=_opts()) as p:
        plan, tok = p | "Sizing" >> beam.Create([sizing]), p | "Tokenizer" >> beam.Create([tokenizer_json])
        written = p | "Sampled" >> beam.Create(sampled) | job.WriteShards(PreprocessConfig(), staging, plan, tok)
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
    expected = {}
    for s in sampled:
        total = sizing.shards[s.split]
        name = job.shard_name(s.split, stable_int("shard", example_id(s.lang, s.example, s.copy)) % total, total)
        expected.setdefault(name, []).append(example_id(s.lang, s.example, s.copy))
    for name, ids in expected.items():
        written = pq.read_table(tmp_path / name).column("example_id").to_pylist()
        assert written == sorted(ids, key=lambda i: (stable_int("order", i), i)), name


def test_write_rejects_writes_one_sorted_file_per_language(tmp_path):
    def reject(lang, page_id, source):
        return job.Reject(lang, page_id, f"T{page_id}", source, "parse_errors", "parse error: x")

    rejects = [reject("en", 7, "a:9"), reject("de", 3, "b:1"), reject("en", -1, "a:5"), reject("en", 2, "a:1"),
               reject("en", -1, "a:2")]
    with TestPipeline(options=_opts()) as p:
        assert_that(p | beam.Create(rejects) | job.WriteRejects(str(tmp_path)),
                    equal_to([f"{schema.REJECTS}/de.jsonl", f"{schema.REJECTS}/en.jsonl"]))
    folder = tmp_path / schema.REJECTS
    assert sorted(f.name for f in folder.iterdir()) == ["de.jsonl", "en.jsonl"]
    en = [json.loads(line) for line in (folder / "en.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [(r["page_id"], r["source"]) for r in en] == [(-1, "a:2"), (-1, "a:5"), (2, "a:1"), (7, "a:9")]
    assert json.loads((folder / "de.jsonl").read_text(encoding="utf-8")) == rejects[1]._asdict()


def test_collect_stats_writes_every_count_as_one_sorted_json_file(tmp_path):
    n = len(schema.CONSTRUCT_DROPS)
    with TestPipeline(options=_opts()) as p:
        inputs = stats.StatsInputs(
            outcomes=p | "Outcomes" >> beam.Create([job.Outcome("en", "kept"), job.Outcome("en", "kept"),
                                                    job.Outcome("sw", "empty"), job.Outcome("en", "redirects")]),
            replaced=p | "Replaced" >> beam.Create([job.Replaced("en", 2), job.Replaced("en", 3)]),
            dropped=p | "Dropped" >> beam.Create([job.Dropped("en", (1,) + (0,) * (n - 1)), job.Dropped("en", (1,) * n)]),
            example_langs=p | "Examples" >> beam.Create(["en", "en", "sw"]),
            weights=p | "Weights" >> beam.Create([{"en": 0.5, "sw": 2.0}]),
            validation_langs=p | "Validation" >> beam.Create(["sw", "en", "sw"]),
            headings=p | "Headings" >> beam.Create([job.Headings("en", 2, ("References", "Notes"), "History"),
                                                    job.Headings("en", 0, ("References",), "History"),
                                                    job.Headings("en", 0, (), "Life")]),
            masks=p | "Masks" >> beam.Create([job.MaskHistograms("en", {100: 1, 150: 3}, {5: 2}),
                                              job.MaskHistograms("en", {150: 1, 40: 1}, {5: 1, 9: 1, 20: 1})]),
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
