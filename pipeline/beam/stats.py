"""The job's accounting: every count the manifest carries per language, combined from what the
steps emit, written as one staged JSON file of Stat rows (pipeline/output/output.py reads it).

Beside the page outcomes and drops, two summaries show what the text and the masks look like on a
language nobody checked (`canine inspect` prints them):
- text: pages with language-variant markup and the constructs rendered; with `--convert`, the
  pages the whole-page conversion changed and the characters it changed (present when any);
  the headings dropped as end matter and the headings that most often end a page after
  cleaning, with counts. A kept heading that is a bibliography in that language shows up here first.
- masks: the CANINE-C masked share per example (p10, median) and the masked span lengths
  (median, p90, max), read exactly from integer histograms (per-mille shares, span lengths) that
  combine by addition, so they do not depend on how examples were spread over shards or workers.
"""

from typing import NamedTuple

import apache_beam as beam

from contract import schema
from contract.files import save_json
from pipeline.beam import tally
from pipeline.beam.elements import Stat

# Headings listed per language in the manifest: the most frequent first, ties by title.
TOP_HEADINGS = 20


class StatsInputs(NamedTuple):  # the PCollections CollectStats reads: a tuple of them, which Beam takes as an input
    tallies: beam.PCollection  # tally.LangTally, one per (work item, language)
    examples: beam.PCollection  # (lang, copies of examples in the output)
    weights: beam.PCollection  # Sizing.weights, one dict
    validation: beam.PCollection  # (lang, validation pages)
    masks: beam.PCollection  # elements.MaskHistograms, one per (shard, language)


def add_counts(rows):
    """Element-wise sum of count tuples (zeros for none)."""
    total = []
    for row in rows:
        total += [0] * (len(row) - len(total))
        for i, n in enumerate(row):
            total[i] += n
    return tuple(total)


def merge_histograms(histograms) -> dict:
    """{value: count} dicts summed (a Beam combiner: any grouping gives the same result)."""
    out = {}
    for h in histograms:
        for value, n in h.items():
            out[value] = out.get(value, 0) + n
    return out


def quantile(histogram: dict, q: float):
    """The smallest value v with at least q of the counted items <= v (None when empty): exact,
    the "lower" quantile of the items the histogram counts."""
    total = sum(histogram.values())
    if not total:
        return None
    need, seen = max(1, -(-q * total // 1)), 0  # ceil(q * total), at least the first item
    for value in sorted(histogram):
        seen += histogram[value]
        if seen >= need:
            return value
    return max(histogram)


def top(counts: dict, n: int = TOP_HEADINGS) -> list:
    """[[title, count], ...]: the n most frequent, ties by title."""
    return [[t, c] for t, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


class _TallyFn(beam.CombineFn):
    """LangTally of one language -> its outcomes, replaced characters, dropped constructs and
    Headings values, summed (order-free: any grouping gives the same sums)."""

    def create_accumulator(self):
        return (), 0, (), tally.Headings().values()

    def add_input(self, acc, t):
        return self.merge_accumulators([acc, (t.outcomes, t.replaced, t.dropped, t.headings)])

    def merge_accumulators(self, accs):
        accs = list(accs)
        headings = tally.Headings()
        for a in accs:
            headings.merge(a[3])
        return (add_counts(a[0] for a in accs), sum(a[1] for a in accs), add_counts(a[2] for a in accs),
                headings.values())

    def extract_output(self, acc):
        return acc


def text_summary(headings) -> dict:
    """The manifest's `text` of a language from its summed Headings values."""
    h = tally.Headings(headings)
    text = {"variant_pages": h.variant_pages, "variant_constructs": h.variants,
            "end_matter_dropped": top(h.end_matter), "last_headings_kept": top(h.last_kept)}
    if h.converted_pages:  # only a --convert run has any: the others' manifests stay as they were
        text.update(converted_pages=h.converted_pages, converted_characters=h.converted)
    return text


def tally_stats(lang: str, acc) -> list:
    """A language's summed tallies -> its Stat rows: a row only for what it has (an absent row
    reads as zero, and a language without a page told of has no `text`)."""
    outcomes, replaced, dropped, headings = acc
    rows = [Stat("outcome", lang, n, outcome=o) for o, n in zip(schema.PAGE_OUTCOMES, outcomes) if n]
    if replaced:
        rows.append(Stat("replaced", lang, replaced))
    if any(dropped):
        rows.append(Stat("dropped", lang, list(dropped)))
    if headings[0]:
        rows.append(Stat("text", lang, text_summary(headings)))
    return rows


def mask_summary(share: dict, spans: dict) -> dict:
    """The manifest's `masks` of a language from its merged histograms (shares in per-mille)."""
    def pct(v):
        return None if v is None else round(v / 10, 1)

    return {"examples": sum(share.values()), "masked_share_p10_pct": pct(quantile(share, 0.1)),
            "masked_share_median_pct": pct(quantile(share, 0.5)), "spans": sum(spans.values()),
            "span_median": quantile(spans, 0.5), "span_p90": quantile(spans, 0.9),
            "span_max": max(spans) if spans else None}


class CollectStats(beam.PTransform):
    """StatsInputs -> everything the manifest needs besides the shard list, as one JSON file in
    staging (Stat.row each: pipeline/output/output.py reads them back with Stat.from_row), plus each
    language's validation pages (Stat "validation_pages": not in the manifest; output.without_validation
    names the languages that got none)."""

    def __init__(self, staging):
        super().__init__()
        self.staging = staging

    # `inputs`: a StatsInputs. Not annotated: Beam reads an annotation of expand() as a type hint
    # of its input, and ignores, with a warning, one that is not a PCollection.
    def expand(self, inputs):
        records = (
            inputs.tallies | "TallyByLang" >> beam.Map(lambda t: (t.lang, t))
            | "SumTallies" >> beam.CombinePerKey(_TallyFn())
            | "TallyRecs" >> beam.FlatMapTuple(tally_stats),
            inputs.examples | "SumExamples" >> beam.CombinePerKey(sum)
            | "ExampleRec" >> beam.MapTuple(lambda lang, n: Stat("examples", lang, n)),
            inputs.weights | "WeightRecs" >> beam.FlatMap(lambda w: [Stat("weight", lang, v) for lang, v in w.items()]),
            inputs.validation | "ValidationRec" >> beam.MapTuple(lambda lang, n: Stat("validation_pages", lang, n)),
            inputs.masks | "MasksByLang" >> beam.Map(lambda m: (m.lang, (m.share, m.spans)))
            | "MergeMasks" >> beam.CombinePerKey(_merge_pairs)
            | "MaskRec" >> beam.MapTuple(lambda lang, h: Stat("masks", lang, mask_summary(*h))),
        )
        return (
            records
            | "All" >> beam.Flatten()
            | "ToList" >> beam.combiners.ToList()
            | "Sort" >> beam.Map(lambda stats: sorted((s.row() for s in stats), key=lambda r: [str(x) for x in r]))
            | "WriteStats" >> beam.Map(save_json, f"{self.staging}/stats.json")
        )


def _merge_pairs(pairs):
    pairs = list(pairs)
    return merge_histograms(p[0] for p in pairs), merge_histograms(p[1] for p in pairs)
