"""The export fills in every script: a tiny CANINE-C trained on Chinese, Japanese and
English pages answers a masked Han or kana character with a character of its script family (Han,
kana or CJK punctuation) and holds a Han or kana character among its top 3, and answers a Latin
letter with a Latin letter, on held-out pages, through Hugging Face's own fill-mask pipeline.

The data and the measure are benchmarks/fill_scripts.py's (it says what they are, and runs them
for as many steps as you like): the bundled sample's zh pages, eight of its en pages (Latin is
learnt in the first steps; the rest of the budget goes to Han and kana) and six real Japanese
articles through `canine preprocess`, `canine pretrain` of the tiny preset (a local Ray cluster,
1 worker, ZeRO-2) for STEPS, then each judged character of the validation split masked alone. One
worker trains what two do (the run does not depend on the worker count; the figures below are the
same) with 20% less of the machine's CPU (279 s against 348, 228 s wall against 195, alone on a
2-core Xeon): the suite runs two tests at a time, and is CPU-bound.
The best answer's being Han or kana itself ("script") takes longer than the suite affords: 0.77
(zh) and 0.81 (ja) after 1500 steps, ~20 minutes of a 2-core machine (the benchmark's docstring)."""

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from fill_scripts import CJK, canine, held_out, measure, preprocess, script  # noqa: E402

STEPS = 300
EN_PAGES = 8
# What measure() must reach on every language (its printout under pytest -s has the rest). Measured
# (2026-11-29, AMD EPYC AVX2, 2 workers; the same on a Xeon with AVX-512, 1 or 2 workers; at 200 steps
# ja's family share was 0.375): best answer CJK zh 1.0, ja 0.825; Han/kana in the top 3 zh 1.0, ja
# 0.942; best answer Han/kana zh 0.0, ja 0.208; en Latin 1.0, exact 0.158;
# read as the lowest printable codepoint of the bucket, 0.0. Longer runs: benchmarks/fill_scripts.py.
FLOOR = 0.75
TOP3_FLOOR = 0.85
EN_FLOOR = 0.9


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    """The export of a STEPS-step tiny CANINE-C run on zh, ja and en pages."""
    work = tmp_path_factory.mktemp("fill_scripts")
    done = preprocess(work, EN_PAGES)
    assert done.returncode == 0, done.stderr[-3000:]
    done = canine(["pretrain", "--data", "shards", "--output", "run", "--config", "tiny", "--max-steps", STEPS,
                   "--workers", 1, "--set", "train.eval_every=0", "--set", f"checkpoint.every={STEPS}"], cwd=work)
    assert done.returncode == 0, done.stderr[-3000:]
    return work / "run" / "hf"


def _remember_encodings(model) -> dict:
    """Make model.encode answer an input it has seen from memory; the memory. The encoder's states
    do not depend on how a bucket is read as a character, so the second reading of the held-out
    characters below reuses the first's (~200 forward passes, ~0.5 s each on the shared 2-core
    machine); model.candidates runs as it is."""
    encode, memory = model.encode, {}

    def remembered(ids):
        key = tuple(ids.flatten().tolist())
        if key not in memory:
            memory[key] = encode(ids)
        return memory[key]

    model.encode = remembered
    return memory


@pytest.mark.slow
def test_a_masked_character_is_answered_in_its_script_family_on_held_out_pages(export):
    from transformers import AutoModelForMaskedLM

    inventory = json.loads((export / "char_inventory.json").read_text())
    assert inventory["complete"] and {script(chr(c)) for c, _ in inventory["counts"]} >= {"han", "kana", "latin"}
    model = AutoModelForMaskedLM.from_pretrained(str(export), trust_remote_code=True).eval()
    cases = held_out(export)
    assert set(cases) == {"zh", "ja", "en"}
    _remember_encodings(model)
    measured = {lang: measure(model, cases[lang]) for lang in ("zh", "ja", "en")}
    # The same head, each bucket read as its lowest printable codepoint (as before the inventory).
    model.char_inventory, model._bucket_answers = [], {}
    lowest = {lang: measure(model, cases[lang]) for lang in ("zh", "ja")}
    print(f"\nfill on held-out characters after {STEPS} steps: {measured}; lowest printable: {lowest}")
    for lang in ("zh", "ja", "en"):
        m = measured[lang]
        assert m["judged"] >= 30 and m["family"] >= FLOOR and m["top3"] >= TOP3_FLOOR, (lang, m)
    assert measured["en"]["script"] >= EN_FLOOR
    # Read as the lowest printable codepoint of its bucket, no answer was Han, kana or CJK at all.
    assert all(lowest[lang]["family"] < 0.05 < measured[lang]["family"] for lang in lowest), lowest


@pytest.mark.slow
def test_the_fill_mask_pipeline_answers_readmes_chinese_query_with_a_han_character(export):
    from transformers import pipeline

    fill = pipeline("fill-mask", model=str(export), trust_remote_code=True)
    m = fill.tokenizer.mask_token
    answers = fill(f"北京是中国的首{m}。", top_k=3)  # README's example
    assert len(answers) == 3 and all(script(a["token_str"]) in CJK for a in answers)
    assert any(script(a["token_str"]) == "han" for a in answers)
    assert answers[0]["sequence"] == f"北京是中国的首{answers[0]['token_str']}。"
    assert answers[0]["score"] >= answers[1]["score"] >= answers[2]["score"] > 0
