"""Fixtures for the training tests: shard directories (synthetic, and the real pipeline's output
on the bundled sample), a local Ray cluster, a one-process torch.distributed group.

`contract_shards` writes what `canine preprocess` writes (pipeline/contract.py): manifest.json,
train/*.parquet, validation/*.parquet (contract.SCHEMA, zstd) and tokenizer.json (a WordPiece
trained with `tokenizers` on the fixture text), from synthetic multilingual text. Mask plans
follow the contract: 15% of whitespace spans (at most 320 characters), 15% of subwords (at most
80) with 80/10/10 actions and same-length replacements. It returns the directory path; it may later
run the real pipeline on the bundled sample instead, with the same signature.
"""

import hashlib
import json
import os
import socket

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline import contract
from training.synthetic import word_spans

os.environ.setdefault("DS_ACCELERATOR", "cpu")  # before anything imports deepspeed
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

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
        action = rng.choice([contract.ACTION_MASK, contract.ACTION_RANDOM, contract.ACTION_KEEP], p=[0.8, 0.1, 0.1])
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
    """Write a small pipeline-shaped output directory under `root`; returns it. (Also used by
    benchmarks/train_throughput.py for data of a chosen length.)"""
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

    config = {"seq_len": seq_len, "seed": seed, "fixture": "tests/training/conftest.py", "schema_version": 1}
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


@pytest.fixture(scope="session")
def contract_shards(tmp_path_factory) -> str:
    """A contract-valid shard directory (see the module docstring); returns its path."""
    return write_contract_shards(str(tmp_path_factory.mktemp("shards")))


@pytest.fixture(scope="session")
def pipeline_shards(sample_xml, tmp_path_factory) -> str:
    """The real pipeline (`canine preprocess`, Beam DirectRunner) on the bundled sample dumps, at
    length 256 with sentence-order pairs: one train shard of ~1650 examples, 64 for validation."""
    from jobs import cli

    out = str(tmp_path_factory.mktemp("pipeline") / "shards")
    argv = ["preprocess", *map(str, sample_xml.values()), "--output", out, "--seq-len", str(SEQ_LEN),
            "--vocab-size", "1000", "--validation-fraction", "0.05", "--sentence-order", "--workers", "1"]
    assert cli.main(argv) == 0
    return out


@pytest.fixture(scope="session")
def ray_local(s3_store, gcs_store):
    """One local Ray cluster on 127.0.0.1 for the session's end-to-end runs (CPU only). Started
    after the object-store servers: its processes inherit their endpoints and dummy credentials
    from the environment, as a cluster that `canine pretrain` starts inherits the driver's."""
    import ray

    ray.init(address="local", num_cpus=4, include_dashboard=False, _node_ip_address="127.0.0.1")
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def reference_run(pipeline_shards, ray_local, tmp_path_factory):
    """(output, summary, metrics records) of the uninterrupted 2-worker ZeRO-2 run on the
    pipeline's shards (tests/training/reference_settings.py) that the end-to-end, restart and
    multi-node tests compare their losses with step by step. log.profile_steps leaves the
    arithmetic unchanged."""
    from reference_settings import reference_config
    from training.train import metrics
    from training.train.run import pretrain

    output = tmp_path_factory.mktemp("reference")
    summary = pretrain(reference_config(pipeline_shards, output, **{"log.profile_steps": 2}))
    return str(output), summary, metrics.read_metrics(str(output))


@pytest.fixture(scope="session")
def one_process_group():
    """torch.distributed with world size 1 (gloo) in the test process, as Ray Train sets it up in
    a worker, for DeepSpeed unit tests. Kept for the session: DeepSpeed holds on to the group."""
    import torch.distributed as dist

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # DeepSpeed reads LOCAL_RANK, as Ray Train's workers have it
    dist.init_process_group("gloo", init_method="env://", rank=0, world_size=1)
    yield
    dist.destroy_process_group()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
