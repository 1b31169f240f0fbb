"""Synthetic rows in the shard contract's format, for tests, benchmarks and smoke runs without
shards. Not real text: "words" of random letters separated by spaces, with mask plans drawn the
way the pipeline draws them (15% of whitespace spans / subwords, 80/10/10 actions), so every
code path of training/batch.py gets exercised with the real column types (pipeline.contract.SCHEMA).
`write_contract_shards` writes a whole output directory (manifest, shards, tokenizer) of made-up
multilingual text: the tests' shard fixture and the training benchmarks use it.
"""

import hashlib
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline import contract

_ACTIONS, _ACTION_SHARES = list(contract.SUBWORD_ACTION_SHARES), list(contract.SUBWORD_ACTION_SHARES.values())


def synthetic_rows(num_rows: int, length: int, seed: int = 0, vocab_size: int = 1000,
                   min_length: int | None = None) -> pa.Table:
    """`num_rows` examples of `min_length`..`length` codepoints (CLS A SEP [B SEP])."""
    rng = np.random.default_rng(seed)
    rows = {name: [] for name in contract.COLUMNS}
    for i in range(num_rows):
        n = int(rng.integers(min_length or length, length + 1))
        body = rng.integers(ord("a"), ord("z") + 1, size=n - 3)
        body[rng.random(n - 3) < 0.2] = ord(" ")
        body[0] = body[-1] = ord("x")  # no leading / trailing space
        split = n // 2 if i % 2 else None  # odd rows have two segments
        codepoints = np.concatenate([[contract.CLS], body, [contract.SEP]])
        segments = np.zeros(len(codepoints), dtype=np.int8)
        if split:
            codepoints = np.concatenate([codepoints[:split], [contract.SEP], codepoints[split:]])
            segments = np.concatenate([segments[: split + 1], np.ones(len(codepoints) - split - 1, np.int8)])
        codepoints = codepoints[:n]
        segments = segments[:n]
        codepoints[-1] = contract.SEP
        spans = word_spans(codepoints)
        chosen = [s for s in spans if rng.random() < contract.MASK_RATE]
        char_positions = np.concatenate([np.arange(a, b) for a, b in chosen] or [np.zeros(0, int)])
        char_positions = char_positions[: contract.MAX_CHAR_PREDICTIONS]
        # Subwords: each word cut into pieces of at most 4 characters.
        pieces = [(a + k, min(b, a + k + 4)) for a, b in spans for k in range(0, b - a, 4)]
        picked = [p for p in pieces if rng.random() < contract.MASK_RATE][: contract.MAX_SUBWORD_PREDICTIONS]
        starts = np.array([a for a, _ in picked], dtype=np.int32)
        lengths = np.array([b - a for a, b in picked], dtype=np.int32)
        actions = rng.choice(_ACTIONS, p=_ACTION_SHARES, size=len(picked)).astype(np.int8)
        replacement_length = int(lengths[actions == contract.ACTION_RANDOM].sum())
        values = {
            "example_id": f"synthetic-{seed}-{i}",
            "lang": "xx",
            "page_ids": [i],
            "codepoints": codepoints.astype(np.int32),
            "segment_ids": segments,
            "sop_label": (contract.SOP_SWAPPED if rng.random() < 0.5 else contract.SOP_IN_ORDER)
            if split else contract.SOP_NO_PAIR,
            "char_mask_positions": char_positions.astype(np.int32),
            "subword_starts": starts,
            "subword_lengths": lengths,
            "subword_ids": rng.integers(0, vocab_size, size=len(picked)).astype(np.int32),
            "subword_predict_offsets": (rng.random(len(picked)) * lengths).astype(np.int32),
            "subword_actions": actions,
            "subword_replacements": rng.integers(ord("a"), ord("z") + 1, size=replacement_length).astype(np.int32),
        }
        for name in contract.COLUMNS:
            rows[name].append(values[name])
    return pa.Table.from_pydict(rows, schema=contract.SCHEMA)


def word_spans(codepoints) -> list[tuple[int, int]]:
    """[start, end) of each maximal run of non-space, non-special characters."""
    word = np.array([c != ord(" ") and not contract.is_aliased(int(c)) for c in codepoints] + [False])
    edges = np.flatnonzero(np.diff(np.concatenate([[False], word]).astype(np.int8)))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist()))


# --- A whole shard directory of made-up multilingual text (tests, benchmarks) ---

SEQ_LEN = 256  # short examples keep the end-to-end runs to seconds per step on 2 cores
TRAIN_SHARD_ROWS = (160, 150, 90)  # uneven on purpose: the planner must balance the workers
VALIDATION_ROWS = 64

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


def _row(rng, tokenizer, by_length, lang: str, index: int, seq_len: int) -> dict:
    pair = index % 2 == 1
    budget = seq_len - (3 if pair else 2)
    a_len = int(rng.integers(budget // 3, budget // 2 if pair else budget))
    texts = [_sentence(rng, lang, a_len)]
    if pair:
        texts.append(_sentence(rng, lang, budget - len(texts[0]) - 1))
    swapped = pair and rng.random() < 0.5
    if swapped:
        texts.reverse()
    cps, segs, starts_of_text = [contract.CLS], [0], []
    for seg, text in enumerate(texts):
        starts_of_text.append(len(cps))
        cps += [ord(c) for c in text] + [contract.SEP]
        segs += [seg] * (len(text) + 1)
    cps = np.array(cps, dtype=np.int32)

    spans = word_spans(cps)
    chosen, total = [], 0
    for i in sorted(rng.choice(len(spans), size=max(1, round(contract.MASK_RATE * len(spans))), replace=False)):
        a, b = spans[i]
        if total + b - a <= contract.MAX_CHAR_PREDICTIONS:
            chosen.append(np.arange(a, b))
            total += b - a
    char_positions = np.concatenate(chosen) if chosen else np.zeros(0, np.int32)

    subwords = []  # (absolute start, length, id)
    for offset, text in zip(starts_of_text, texts):
        enc = tokenizer.encode(text, add_special_tokens=False)
        subwords += [(offset + s, e - s, i) for i, (s, e) in zip(enc.ids, enc.offsets) if e > s]
    k = min(contract.MAX_SUBWORD_PREDICTIONS, max(1, round(contract.MASK_RATE * len(subwords))))
    picked = [subwords[i] for i in sorted(rng.choice(len(subwords), size=k, replace=False))]
    actions, replacements = [], []
    for _, length, _ in picked:
        action = rng.choice(_ACTIONS, p=_ACTION_SHARES)
        if action == contract.ACTION_RANDOM and not by_length.get(length):
            action = contract.ACTION_MASK  # no vocabulary subword of that length
        if action == contract.ACTION_RANDOM:
            word = by_length[length][rng.integers(len(by_length[length]))]
            replacements += [ord(c) for c in word]
        actions.append(action)
    return {
        "example_id": f"{lang}-{index}", "lang": lang, "page_ids": [index],
        "codepoints": cps, "segment_ids": np.array(segs, np.int8),
        "sop_label": (contract.SOP_SWAPPED if swapped else contract.SOP_IN_ORDER) if pair else contract.SOP_NO_PAIR,
        "char_mask_positions": char_positions.astype(np.int32),
        "subword_starts": np.array([s for s, _, _ in picked], np.int32),
        "subword_lengths": np.array([n for _, n, _ in picked], np.int32),
        "subword_ids": np.array([i for _, _, i in picked], np.int32),
        "subword_predict_offsets": np.array([rng.integers(n) for _, n, _ in picked], np.int32),
        "subword_actions": np.array(actions, np.int8),
        "subword_replacements": np.array(replacements, np.int32),
    }


def _train_tokenizer(texts):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=300, special_tokens=["[UNK]"]))
    return tok


def write_contract_shards(root: str, seed: int = 0, seq_len: int = SEQ_LEN, train_rows=TRAIN_SHARD_ROWS,
                          validation_rows: int = VALIDATION_ROWS) -> str:
    """Write what `canine preprocess` writes (pipeline/contract.py) under `root`, from synthetic
    multilingual text; returns it. The manifest, train/ and validation/ Parquet shards
    (contract.SCHEMA, zstd) and the tokenizer (a WordPiece trained with `tokenizers` on the same
    text). Mask plans follow the contract: 15% of whitespace spans (at most 320 characters), 15%
    of subwords (at most 80) with 80/10/10 actions and same-length replacements. The tests'
    `contract_shards` fixture and benchmarks/train_throughput.py use it."""
    os.makedirs(root, exist_ok=True)
    rng = np.random.default_rng(seed)
    langs = sorted(WORDS)
    tokenizer = _train_tokenizer(_sentence(rng, lang, 200) for lang in langs for _ in range(50))
    by_length = {}
    for token in tokenizer.get_vocab():
        word = token.removeprefix("##")
        if token != "[UNK]":
            by_length.setdefault(len(word), []).append(word)
    tokenizer.save(os.path.join(root, contract.TOKENIZER))

    config = {"seq_len": seq_len, "seed": seed, "fixture": "training/synthetic.py", "schema_version": 1}
    manifest = {"schema_version": contract.SCHEMA_VERSION, "config": config,
                "config_sha256": hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest(),
                "splits": {}, "languages": {}}
    index = 0
    for split, sizes in (("train", tuple(train_rows)), ("validation", (validation_rows,))):
        os.makedirs(os.path.join(root, split), exist_ok=True)
        shards = []
        for s, n in enumerate(sizes):
            rows = []
            for _ in range(n):
                rows.append(_row(rng, tokenizer, by_length, langs[index % len(langs)], index, seq_len))
                index += 1
            table = pa.Table.from_pylist(rows, schema=contract.SCHEMA)
            rel = f"{split}/part-{s:05d}.parquet"
            pq.write_table(table, os.path.join(root, rel), compression="zstd", row_group_size=64)
            with open(os.path.join(root, rel), "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            shards.append({"path": rel, "rows": n, "sha256": digest,
                           "codepoints": int(sum(len(r["codepoints"]) for r in rows))})
        manifest["splits"][split] = {"shards": shards}
    for lang in langs:
        manifest["languages"][lang] = {key: 0 for key in contract.LANGUAGE_KEYS}
    with open(os.path.join(root, contract.MANIFEST), "w") as f:
        json.dump(manifest, f, indent=1)
    return root
