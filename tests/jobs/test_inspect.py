"""`canine inspect`: the per-language text and mask statistics under the accounting table."""

import dataclasses

from contract import schema
from contract.manifest import FileRef, Language, Manifest, Split
from jobs.inspect import format_manifest


def small_manifest() -> Manifest:
    de = Language(pages_read=5, redirects=1, non_article=0, parse_errors=1, empty=0, kept=3, examples=3,
                  sampling_weight=1.0, replaced_characters=2, dropped=dict.fromkeys(schema.CONSTRUCT_DROPS, 0))
    empty = Split(rows=0, codepoints=0, shards=())
    return Manifest(schema_version=schema.SCHEMA_VERSION, config={"seq_len": 512}, config_sha256="c" * 64,
                    splits={"train": empty, "validation": empty}, languages={"de": de},
                    tokenizer=FileRef(schema.TOKENIZER, "b" * 64), rejects=())


def test_inspect_shows_each_languages_masks_variants_and_headings():
    m = small_manifest()
    de = dataclasses.replace(
        m.languages["de"],
        text={"variant_pages": 2, "variant_constructs": 5, "end_matter_dropped": [["Literatur", 3], ["Weblinks", 2]],
              "last_headings_kept": [["Leben", 4]]},
        masks={"examples": 9, "masked_share_p10_pct": 12.4, "masked_share_median_pct": 15.0, "spans": 80,
               "span_median": 5, "span_p90": 8, "span_max": 8})
    zh = dataclasses.replace(m.languages["de"], text={}, masks={})  # an output made before the statistics
    text = format_manifest(dataclasses.replace(m, languages={"de": de, "zh": zh}))
    lines = text.splitlines()
    assert lines[-5].split() == ["lang", "masked%p10", "median", "span-med", "span-p90", "span-max"]
    assert lines[-4].split() == ["de", "12.4", "15.0", "5", "8", "8"]
    assert lines[-3:] == ["de: variant markup on 2 pages, 5 constructs rendered",
                          "de: end matter dropped: Literatur 3, Weblinks 2", "de: last headings kept: Leben 4"]
    assert "zh:" not in text
