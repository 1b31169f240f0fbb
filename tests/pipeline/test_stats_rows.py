"""The staged stats.json rows (pipeline/beam/elements.py Stat): written by CollectStats, read back by name
(pipeline/output/output.py read_stats) into the manifest's languages and the note on languages without
validation pages."""

import json
import random

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline

from contract import schema
from pipeline.output import output
from pipeline.beam import stats, tally
from pipeline.beam.elements import MaskHistograms, Stat
from pipeline.beam.runners import beam_options

N = len(schema.CONSTRUCT_DROPS)
EVERY_KIND = [
    Stat("outcome", "en", 3, outcome="kept"),
    Stat("outcome", "en", 1, outcome="redirects"),
    Stat("replaced", "en", 5),
    Stat("dropped", "en", [2] + [0] * (N - 1)),
    Stat("examples", "en", 7),
    Stat("weight", "en", 0.123456789),
    Stat("validation_pages", "en", 1),
    Stat("text", "zh-min-nan", {"variant_pages": 1, "variant_constructs": 2, "end_matter_dropped": [["參考", 1]],
                                "last_headings_kept": []}),
    Stat("masks", "en", {"examples": 6, "masked_share_p10_pct": 4.0, "masked_share_median_pct": 15.0, "spans": 5,
                         "span_median": 5, "span_p90": None, "span_max": 20}),
]


@pytest.mark.parametrize("stat", EVERY_KIND, ids=lambda s: s.kind)
def test_a_stats_row_survives_the_round_trip_through_the_staged_json(stat):
    row = json.loads(json.dumps(stat.row(), ensure_ascii=False))
    back = Stat.from_row(row)
    assert back == stat and type(back) is Stat
    assert back.outcome == stat.outcome and back.value == stat.value  # by name, not by where it sat in the row


def test_the_reader_takes_the_rows_by_name_in_any_order():
    rows = [s.row() for s in EVERY_KIND]
    random.Random(4).shuffle(rows)
    langs = output.languages_from_stats(rows)
    assert list(langs) == ["en", "zh-min-nan"]
    en = langs["en"]
    assert (en.pages_read, en.kept, en.redirects, en.replaced_characters, en.examples) == (4, 3, 1, 5, 7)
    assert en.sampling_weight == 0.123457 and en.dropped[schema.CONSTRUCT_DROPS[0]] == 2
    assert en.masks["span_max"] == 20 and en.text == {}
    assert langs["zh-min-nan"].text["end_matter_dropped"] == [["參考", 1]] and langs["zh-min-nan"].pages_read == 0
    zh_only_validation = Stat("validation_pages", "xx", 1).row()  # a count of the split, not a language entry
    assert "xx" not in output.languages_from_stats([*rows, zh_only_validation])
    assert output.without_validation(rows, langs, 0.005) == {}
    assert output.without_validation([r for r in rows if r[0] != "validation_pages"], langs, 0.005) == {"en": 3}


def _tally(lang, outcomes, replaced=0, dropped=(), headings=None):
    counts = tuple(outcomes.get(o, 0) for o in schema.PAGE_OUTCOMES)
    return tally.LangTally("item", lang, counts, replaced, tuple(dropped), headings or tally.Headings().values(), (), 0)


def test_what_collect_stats_writes_reads_back_as_the_manifests_languages(tmp_path):
    headings = tally.Headings()
    headings.add(1, ("References",), "History", 0)
    with TestPipeline(options=beam_options(1, "DirectRunner")) as p:  # named: never Prism
        inputs = stats.StatsInputs(
            tallies=p | "Tallies" >> beam.Create([
                _tally("en", {"kept": 1}, 2, (1,) * N, headings.values()), _tally("en", {"kept": 1, "empty": 1}, 3),
                _tally("sw", {"kept": 1}, 0, (0,) * (N - 1) + (4,))]),
            examples=p | "Examples" >> beam.Create([("en", 2), ("sw", 1)]),
            weights=p | "Weights" >> beam.Create([{"en": 0.5, "sw": 2.0}]),
            validation=p | "Validation" >> beam.Create([("en", 1)]),
            masks=p | "Masks" >> beam.Create([MaskHistograms("sw", {150: 2}, {4: 3})]),
        )
        _ = inputs | stats.CollectStats(str(tmp_path))
    rows = json.loads((tmp_path / "stats.json").read_text(encoding="utf-8"))
    assert [Stat.from_row(r).row() for r in rows] == rows
    langs = output.languages_from_stats(rows)
    assert (langs["en"].pages_read, langs["en"].kept, langs["en"].empty) == (3, 2, 1)
    assert (langs["sw"].kept, langs["sw"].examples, langs["sw"].sampling_weight) == (1, 1, 2.0)
    assert langs["en"].replaced_characters == 5 and langs["sw"].dropped[schema.CONSTRUCT_DROPS[-1]] == 4
    assert langs["en"].text["end_matter_dropped"] == [["References", 1]] and langs["sw"].masks["span_max"] == 4
    assert langs["sw"].text == {}  # no page of sw told of headings: no `text` row, as before
    output.check_accounting(langs)
    assert output.without_validation(rows, langs, 0.005) == {"sw": 1}
