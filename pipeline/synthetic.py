"""Synthetic rows and shard directories in the shard contract's format, for tests, benchmarks and
smoke runs without real data:

    table = synthetic_rows(8, 300)      # a pyarrow Table of random-letter examples (schema.SCHEMA)
    write_contract_shards(root)         # what `canine preprocess` writes: manifest, shards, tokenizer

Only the text is made up. It stands in for the pipeline's output, so the rest is the pipeline's
own steps: examples are `[CLS] A [SEP] [B SEP]`, a WordPiece vocabulary is trained on the same
text (pipeline/rows/tokenizer.py), and every mask plan comes from pipeline/rows/masks.py: 15% of whitespace
spans (at most 320 characters), 15% of subwords (at most 80) with 80/10/10 actions and
same-length replacements, drawn from each example's counter-based random numbers (pipeline/seeds.py).
So every code path of training/batch.py runs on rows that `canine validate` accepts. It makes
shards, so it is the pipeline's (none of these steps needs Beam); training/ never imports it,
only its tests do.
"""

import hashlib
import os

import numpy as np
import pyarrow.parquet as pq

from contract import schema
from contract.files import file_sha256
from contract.manifest import FileRef, Language, Manifest, Shard, Split, config_sha256, write_manifest
from pipeline import seeds
from pipeline.rows import masks, shards
from pipeline.rows.examples import PackedExample, text_to_codepoints
from pipeline.rows.tokenizer import train_wordpiece


def _example(page: int, texts: list[str], sop_label: int) -> PackedExample:
    """One page's example: CLS A SEP, or CLS A SEP B SEP with segment ids 0 / 1."""
    cps, segments = [np.array([schema.CLS], np.int32)], [np.zeros(1, np.int8)]
    for segment, text in enumerate(texts):
        cps += [text_to_codepoints(text), np.array([schema.SEP], np.int32)]
        segments.append(np.full(len(text) + 1, segment, np.int8))
    return PackedExample([page], np.concatenate(cps), np.concatenate(segments), sop_label, 0)


def _rows(examples: list[tuple[str, PackedExample]], seed: int, tokenizer) -> list[dict]:
    """Contract rows of (language, example) pairs, in their order, planned by pipeline/rows/masks.py."""
    rows = [None] * len(examples)
    for lang in sorted({lang for lang, _ in examples}):
        group = [i for i, (other, _) in enumerate(examples) if other == lang]
        for i, row in zip(group, masks.plan_examples([examples[i][1] for i in group], lang, 0, seed, tokenizer)):
            rows[i] = row
    return rows


def _sop_label(rng, pair: bool) -> int:
    if not pair:
        return schema.SOP_NO_PAIR
    return schema.SOP_SWAPPED if rng.random() < 0.5 else schema.SOP_IN_ORDER


def synthetic_rows(num_rows: int, length: int, seed: int = 0, vocab_size: int = 1000,
                   min_length: int | None = None):
    """`num_rows` examples of `min_length`..`length` codepoints, odd rows two segments: "words"
    of random letters between spaces, subword ids below `vocab_size` (a vocabulary trained on them)."""
    rng = seeds.synthetic_rng(seed)
    pages = []
    for i in range(num_rows):
        n = int(rng.integers(min_length or length, length + 1))
        pair = i % 2 == 1
        body = rng.integers(ord("a"), ord("z") + 1, size=n - (3 if pair else 2))
        body[rng.random(len(body)) < 0.2] = ord(" ")
        cut = len(body) // 2 if pair else len(body)
        body[[0, cut - 1, cut % len(body), -1]] = ord("x")  # no segment starts or ends with a space
        text = "".join(map(chr, body))
        pages.append(([text[:cut], text[cut:]] if pair else [text], _sop_label(rng, pair)))
    tokenizer = train_wordpiece([t for texts, _ in pages for t in texts], vocab_size=vocab_size)
    examples = [("xx", _example(i, texts, sop)) for i, (texts, sop) in enumerate(pages)]
    return shards.rows_to_table(_rows(examples, seed, tokenizer))


# --- A whole shard directory of made-up multilingual text (tests, benchmarks) ---

SEQ_LEN = 256  # short examples keep the end-to-end runs to seconds per step on 2 cores
TRAIN_SHARD_ROWS = (160, 150, 90)  # uneven on purpose: the planner must balance the workers
VALIDATION_ROWS = 64
ROW_GROUP_ROWS = 64  # small row groups, so reading a unit crosses them (training/train/data.py)

# A few words per language and script: Latin, Cyrillic, Greek, Devanagari, and Japanese (no spaces).
WORDS = {
    "en": "the river city music winter garden history language north station village small".split(),
    "de": "der fluss stadt musik winter garten geschichte sprache norden bahnhof dorf klein".split(),
    "ru": "река город музыка зима сад история язык север вокзал деревня малый".split(),
    "el": "ποταμός πόλη μουσική χειμώνας κήπος ιστορία γλώσσα βορράς σταθμός χωριό".split(),
    "hi": "नदी शहर संगीत सर्दी बगीचा इतिहास भाषा उत्तर स्टेशन गाँव".split(),
    "ja": "川 都市 音楽 冬 庭園 歴史 言語 北 駅 村".split(),
}


def _sentence(rng, lang: str, chars: int) -> str:
    words, out = WORDS[lang], []
    while sum(len(w) + 1 for w in out) < chars:
        out.append(words[rng.integers(len(words))])
    joiner = "" if lang == "ja" else " "
    return joiner.join(out)[:chars].strip() + ("。" if lang == "ja" else ".")


def _page(rng, lang: str, index: int, seq_len: int) -> PackedExample:
    """Example `index`: odd ones are sentence pairs, half of them swapped."""
    pair = index % 2 == 1
    budget = seq_len - (3 if pair else 2)
    texts = [_sentence(rng, lang, int(rng.integers(budget // 3, budget // 2 if pair else budget)))]
    if pair:
        texts.append(_sentence(rng, lang, budget - len(texts[0]) - 1))
    sop = _sop_label(rng, pair)
    return _example(index, texts[::-1] if sop == schema.SOP_SWAPPED else texts, sop)


def _write_shard(root: str, rel: str, rows: list[dict]) -> Shard:
    path = os.path.join(root, rel)
    pq.write_table(shards.rows_to_table(rows), path, compression="zstd", row_group_size=ROW_GROUP_ROWS)
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return Shard(rel, len(rows), sum(len(r["codepoints"]) for r in rows), digest)


def write_contract_shards(root: str, seed: int = 0, seq_len: int = SEQ_LEN, train_rows=TRAIN_SHARD_ROWS,
                          validation_rows: int = VALIDATION_ROWS) -> str:
    """Write what `canine preprocess` writes (contract/schema.py) under `root`, from synthetic
    multilingual text (one page per example); returns `root`. The tests' `contract_shards` fixture
    and benchmarks/train_throughput.py use it."""
    os.makedirs(root, exist_ok=True)
    rng = seeds.synthetic_rng(seed)
    langs = sorted(WORDS)
    tokenizer = train_wordpiece([_sentence(rng, lang, 200) for lang in langs for _ in range(50)], vocab_size=300)
    tokenizer.save(os.path.join(root, schema.TOKENIZER))
    splits, index, examples = {}, 0, dict.fromkeys(langs, 0)
    for split, sizes in (("train", tuple(train_rows)), ("validation", (validation_rows,))):
        os.makedirs(os.path.join(root, split), exist_ok=True)
        written = []
        for s, n in enumerate(sizes):
            pages = [(langs[i % len(langs)], _page(rng, langs[i % len(langs)], i, seq_len))
                     for i in range(index, index + n)]
            index += n
            for lang, _ in pages:
                examples[lang] += 1
            written.append(_write_shard(root, f"{split}/part-{s:05d}.parquet", _rows(pages, seed, tokenizer)))
        splits[split] = Split(sum(s.rows for s in written), sum(s.codepoints for s in written), tuple(written))
    plans = masks.MaskPlanConfig()  # what _rows planned with; `canine validate` reads the span rule from here
    config = {"seq_len": seq_len, "seed": seed, "fixture": "pipeline/synthetic.py",
              "char_spans": plans.char_spans, "char_span_max": plans.char_span_max}
    write_manifest(root, Manifest(
        schema_version=schema.SCHEMA_VERSION, config=config, config_sha256=config_sha256(config), splits=splits,
        languages={lang: Language(pages_read=n, redirects=0, non_article=0, parse_errors=0, empty=0, kept=n,
                                  examples=n, sampling_weight=1.0, replaced_characters=0,
                                  dropped=dict.fromkeys(schema.CONSTRUCT_DROPS, 0)) for lang, n in examples.items()},
        tokenizer=FileRef(schema.TOKENIZER, file_sha256(os.path.join(root, schema.TOKENIZER))),
        rejects=()))
    return root
