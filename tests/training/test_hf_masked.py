"""An export of a pretraining model also holds its head (training/hf_masked.py, remote code):
AutoModelForMaskedLM loads it with trust_remote_code, its logits are the pretraining model's, its
`fill` answers a fill-in query in three lines; AutoModel still gives the plain CanineModel."""

import json
import logging
import os
import subprocess
import sys

import pytest
import torch
from safetensors import safe_open
from transformers import AutoModel
from transformers import CanineModel as HFModel

from contract import schema
from pipeline.rows.tokenizer import train_wordpiece
from training import hf_masked
from training.canine_config import of_size
from training.heads import CaninePretrainingModel
from training.hf import HEAD_PREFIX, MASKED_MODULE, export_hf, subword_vocab_of

from canine_fixtures import one_thread, padded_inputs  # noqa: F401 (autouse fixture)
from test_export import write_run

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Relative to the logits' largest magnitude. Both sides run fp32; the encoders differ only in
# their kernels' summation order (tests/training/test_hf.py measures that).
REL_TOL = 1e-5


def _model(objective: str, **overrides) -> CaninePretrainingModel:
    torch.manual_seed(0)
    vocab = {"num_subword_vocab": 300} if objective == "subword" else {}
    model = CaninePretrainingModel(of_size("tiny", **{"sop_loss_weight": 0.0, **vocab, **overrides}), objective)
    with torch.no_grad():  # a trained-looking head: biases and norms away from their 0 / 1 init
        for name, p in model.head.named_parameters():
            if "bias" in name or "norm" in name:
                p.add_(0.05 * torch.randn_like(p))
            else:
                p.mul_(3)
    return model.eval()


def _batch(objective: str, L=150, lengths=(150, 97), P=12, seed=1) -> dict:
    """Inputs with padding (row 2 from 97 on), P prediction slots of which the last 3 of row 2
    are padding slots (position 0, weight 0), as training/batch.py builds them."""
    ids, mask, types = padded_inputs(L, lengths, seed)
    g = torch.Generator().manual_seed(seed)
    positions = torch.stack([torch.randperm(n - 2, generator=g)[:P] + 1 for n in lengths])  # inside CLS .. SEP
    weights = torch.ones(len(lengths), P)
    weights[1, -3:] = 0
    positions = positions * weights.long()
    batch = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    if objective == "char":
        gold = torch.randint(1, 0x3000, positions.shape, generator=g) * weights.long()
        order = torch.argsort(torch.rand(positions.shape, generator=g) + (weights == 0), 1)  # padding slots last
        batch.update(char_positions=positions, char_gold_ids=gold, char_targets=gold % 2048, char_order=order,
                     char_weights=weights)
    else:
        labels = torch.randint(0, 300, positions.shape, generator=g)
        batch.update(subword_positions=positions, subword_labels=labels, subword_weights=weights)
    return batch


def _relative(ours, theirs) -> float:
    return ((ours - theirs).abs().max() / theirs.abs().max()).item()


@pytest.mark.parametrize("reveal", ["shifted", "two_stream"])
def test_char_head_logits_are_the_pretraining_models(tmp_path, reveal):
    model = _model("char", char_reveal=reveal)
    export_hf(model, tmp_path)
    masked = hf_masked.CanineForMaskedPrediction.from_pretrained(tmp_path).eval()
    batch = _batch("char")
    order = batch["char_order"]
    with torch.no_grad():
        ours = model(batch, return_logits=True).logits  # (B, P, buckets), step order
        theirs = masked(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"],
                        positions=batch["char_positions"].gather(1, order),
                        gold_ids=batch["char_gold_ids"].gather(1, order)).logits
    assert theirs.shape == ours.shape == (2, 12, 2048)
    assert _relative(ours, theirs) <= REL_TOL
    # The reveal order matters: the same steps read in another order give other logits.
    with torch.no_grad():
        other = masked(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"],
                       positions=batch["char_positions"], gold_ids=batch["char_gold_ids"]).logits
    assert _relative(ours, other) > 1e-3


def test_subword_head_logits_are_the_pretraining_models(tmp_path):
    model = _model("subword")
    export_hf(model, tmp_path)
    masked = hf_masked.CanineForMaskedPrediction.from_pretrained(tmp_path).eval()
    batch = _batch("subword")
    with torch.no_grad():
        ours = model(batch, return_logits=True).logits  # (B, P, vocabulary)
        theirs = masked(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"],
                        positions=batch["subword_positions"], labels=batch["subword_labels"])
    assert theirs.logits.shape == ours.shape == (2, 12, 300)
    assert _relative(ours, theirs.logits) <= REL_TOL
    everywhere = masked(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"]).logits  # (B, L, V)
    assert everywhere.shape == (2, 150, 300)
    # labels give transformers' usual mean cross-entropy
    expected = torch.nn.functional.cross_entropy(ours.flatten(0, 1), batch["subword_labels"].flatten())
    assert abs(theirs.loss.item() - expected.item()) <= 1e-5 * expected.item()


def _greedy_fill_by_our_model(model: CaninePretrainingModel, text: str) -> list[str]:
    """What fill must answer for CANINE-C, computed with the project's model: the masked
    characters left to right, each step seeing the characters decided before it, each bucket
    read as its lowest printable codepoint."""
    ids = [schema.CLS] + [schema.MASK if c == "_" else ord(c) for c in text] + [schema.SEP]
    masked = [i for i, c in enumerate(ids) if c == schema.MASK]
    P, buckets = len(masked), model.config.num_hash_buckets
    decided = []
    for t in range(P):
        gold = torch.tensor([[ord(c) for c in decided] + [schema.BOS] * (P - t)])
        batch = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long),
                 "token_type_ids": torch.zeros(1, len(ids), dtype=torch.long),
                 "char_positions": torch.tensor([masked]), "char_gold_ids": gold, "char_order": torch.arange(P)[None],
                 "char_targets": torch.zeros(1, P, dtype=torch.long), "char_weights": torch.ones(1, P)}
        with torch.no_grad():
            bucket = int(model(batch, return_logits=True).logits[0, t].argmax())
        decided.append(next(chr(c) for c in range(bucket, 0x110000, buckets) if chr(c).isprintable()))
    return decided


def _three_lines(path: str, text: str) -> str:
    return ("from transformers import AutoModelForMaskedLM\n"
            f"model = AutoModelForMaskedLM.from_pretrained({path!r}, trust_remote_code=True)\n"
            f"print(model.fill({text!r}))\n")


# The venv has canine-pretrain installed; a user of an export may not: its packages made unimportable.
_NOT_INSTALLED = "import sys; sys.modules.update(dict.fromkeys(['training', 'contract', 'pipeline', 'jobs']))\n"


def _run_as_a_user(tmp_path, code: str, cwd) -> subprocess.CompletedProcess:
    """`python -c code` without canine-pretrain, from another directory, offline, with
    transformers' module and hub caches in tmp_path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf_home"), HF_MODULES_CACHE=str(tmp_path / "modules"))
    return subprocess.run([sys.executable, "-c", _NOT_INSTALLED + code], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_canine_export_then_the_three_line_fill_in_example_runs_without_the_project(tmp_path):
    model = write_run(str(tmp_path / "run"), str(tmp_path / "shards"))  # a finished CANINE-C run
    (tmp_path / "shards").mkdir()
    exported = subprocess.run([sys.executable, "-m", "jobs.cli", "export", "run", "--to", "exports/canine-c"],
                              cwd=tmp_path, env={**os.environ, "PYTHONPATH": REPO}, capture_output=True, text=True,
                              timeout=300)
    assert exported.returncode == 0, exported.stderr
    export = tmp_path / "exports" / "canine-c"
    with open(os.path.join(REPO, "training", "hf_masked.py"), "rb") as f:
        assert (export / f"{MASKED_MODULE}.py").read_bytes() == f.read()
    text = "The capital of France is P____."
    expected = _greedy_fill_by_our_model(model.eval(), text)
    assert len(expected) == 4
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # One interpreter (each start costs seconds): relative to its directory, then absolute.
    code = _three_lines(os.path.join("..", "exports", "canine-c"), text) + _three_lines(str(export), text)
    probe = "try:\n    import training\nexcept ModuleNotFoundError:\n    print('standalone')\n"
    done = _run_as_a_user(tmp_path, code + probe, elsewhere)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [repr(expected), repr(expected), "standalone"]


def test_subword_fill_names_subwords_from_the_runs_vocabulary(tmp_path):
    texts = ["the capital of france is paris", "paris is a city in france", "a city of lights"] * 20
    tokenizer = train_wordpiece(texts, vocab_size=120)
    (tmp_path / "data").mkdir()
    tokenizer.save(str(tmp_path / "data" / schema.TOKENIZER))
    vocab = subword_vocab_of(str(tmp_path / "data"))
    assert vocab is not None and len(vocab) == tokenizer.vocab_size
    assert all(tokenizer.hf.token_to_id(token) == i for i, token in enumerate(vocab))
    assert subword_vocab_of(str(tmp_path / "nowhere")) is None

    model = _model("subword", num_subword_vocab=len(vocab))
    export_hf(model, tmp_path / "s", subword_vocab=vocab)
    assert json.loads((tmp_path / "s" / hf_masked.SUBWORD_VOCAB_FILE).read_text(encoding="utf-8")) == vocab
    text = "The capital of France is _____, a ___."  # two masked subwords: 5 and 3 characters
    masked = hf_masked.CanineForMaskedPrediction.from_pretrained(tmp_path / "s").eval()
    answer = masked.fill(text)
    # Read at the first character of each run, over the exported vocabulary: the project's model says the same.
    ids = [schema.CLS] + [schema.MASK if c == "_" else ord(c) for c in text] + [schema.SEP]
    starts = [i for i, c in enumerate(ids) if c == schema.MASK and ids[i - 1] != schema.MASK]
    batch = {"input_ids": torch.tensor([ids]), "attention_mask": torch.ones(1, len(ids), dtype=torch.long),
             "token_type_ids": torch.zeros(1, len(ids), dtype=torch.long), "subword_positions": torch.tensor([starts]),
             "subword_labels": torch.zeros(1, 2, dtype=torch.long), "subword_weights": torch.ones(1, 2)}
    with torch.no_grad():
        best = model(batch, return_logits=True).logits[0].argmax(-1).tolist()
    assert answer == [vocab[i] for i in best] and len(answer) == 2

    export_hf(model, tmp_path / "no-vocab")  # the run's data was unreadable: the encoder still exports
    bare = hf_masked.CanineForMaskedPrediction.from_pretrained(tmp_path / "no-vocab")
    with pytest.raises(ValueError, match="subword_vocab.json"):
        bare.fill(text)
    bare.subword_vocab = vocab
    assert bare.fill(text) == answer
    with pytest.raises(ValueError, match="other data"):
        export_hf(_model("subword", num_subword_vocab=len(vocab) + 1), tmp_path / "wrong", subword_vocab=vocab)


def test_fill_alphabet_and_refusals(tmp_path):
    model = _model("char", char_reveal="two_stream")
    export_hf(model, tmp_path)
    masked = hf_masked.CanineForMaskedPrediction.from_pretrained(tmp_path).eval()
    assert masked.fill("a [?]b", mask="[?]") == masked.fill("a _b")  # any mask string, one character each
    answer = masked.fill("Seoul is in ___.", alphabet="한국어ab")
    assert len(answer) == 3 and set(answer) <= set("한국어ab")
    with pytest.raises(ValueError, match="nothing to fill"):
        masked.fill("no masks here")
    with pytest.raises(ValueError, match="at most 2048"):
        masked.fill("_" * 2047)
    with pytest.raises(ValueError, match="positions and gold_ids"):
        masked(torch.tensor([[schema.CLS, schema.MASK, 65, 66, schema.SEP]]))


def test_automodel_still_loads_the_plain_encoder(tmp_path):
    model = _model("char")
    export_hf(model.encoder, tmp_path / "encoder")  # a bare encoder: exactly the export of before
    assert sorted(os.listdir(tmp_path / "encoder")) == ["canine_export.json", "config.json", "model.safetensors",
                                                         "tokenizer_config.json"]
    config = json.loads((tmp_path / "encoder" / "config.json").read_text())
    assert "auto_map" not in config and "pretraining_head" not in config
    export_hf(model, tmp_path / "full")
    config = json.loads((tmp_path / "full" / "config.json").read_text())
    assert config["auto_map"] == {"AutoModelForMaskedLM": f"{MASKED_MODULE}.CanineForMaskedPrediction"}
    assert config["pretraining_head"] == {"objective": "char", "char_reveal": "shifted"}
    assert config["architectures"] == ["CanineModel"]

    # model.safetensors is byte for byte the plain encoder's export: the head is a file of its own.
    assert (tmp_path / "full" / "model.safetensors").read_bytes() == (tmp_path / "encoder" / "model.safetensors").read_bytes()
    plain = HFModel.from_pretrained(tmp_path / "encoder")
    # AutoModel on the full export: a CanineModel, nothing missing or left over, so transformers
    # prints no LOAD REPORT (it listed the head's 18 tensors as UNEXPECTED when they were inside).
    logger = logging.getLogger("transformers.modeling_utils")
    seen = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    logger.addHandler(handler)
    try:
        full, info = AutoModel.from_pretrained(tmp_path / "full", output_loading_info=True)
    finally:
        logger.removeHandler(handler)
    assert type(full) is HFModel
    assert not any(info[k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")), info
    assert not [m for m in seen if "LOAD REPORT" in m], seen
    assert full.state_dict().keys() == plain.state_dict().keys()
    for key, tensor in plain.state_dict().items():
        assert torch.equal(full.state_dict()[key], tensor), key
    # The masked model: the encoder from model.safetensors, the head from its file, exactly.
    masked, info = hf_masked.CanineForMaskedPrediction.from_pretrained(tmp_path / "full", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    with safe_open(tmp_path / "full" / hf_masked.HEAD_FILE, "pt") as f:
        head = {k: f.get_tensor(k) for k in f.keys()}
    assert head and all(k.startswith(HEAD_PREFIX) for k in head)
    with safe_open(tmp_path / "full" / "model.safetensors", "pt") as f:
        assert set(f.keys()) | set(head) == set(masked.state_dict())
    for key, tensor in head.items():
        assert torch.equal(masked.state_dict()[key], tensor), key
    trained = {f"{HEAD_PREFIX}{k.removeprefix('head.')}": v for k, v in model.state_dict().items() if k.startswith("head.")}
    assert set(trained) == set(head) and all(torch.equal(trained[k], head[k]) for k in head)
    # An export that lost its head is refused, not answered by a randomly initialised one.
    (tmp_path / "full" / hf_masked.HEAD_FILE).unlink()
    with pytest.raises(ValueError, match=f"has no {hf_masked.HEAD_FILE} .*the head's weights are missing"):
        hf_masked.CanineForMaskedPrediction.from_pretrained(tmp_path / "full")


def test_an_export_with_the_head_in_model_safetensors_still_loads(tmp_path):
    """Exports written before the head had a file of its own kept it in model.safetensors."""
    from safetensors.torch import load_file, save_file

    model = _model("char")
    export_hf(model, tmp_path / "old")
    weights = tmp_path / "old" / "model.safetensors"
    head = tmp_path / "old" / hf_masked.HEAD_FILE
    save_file({**load_file(weights), **load_file(head)}, weights, metadata={"format": "pt"})
    head.unlink()
    new = hf_masked.CanineForMaskedPrediction.from_pretrained(tmp_path / "old")
    for key, tensor in model.state_dict().items():
        if key.startswith("head."):
            assert torch.equal(new.state_dict()[HEAD_PREFIX + key.removeprefix("head.")], tensor), key


# 学 (U+5B66) and U+1B66 share bucket 7014 of CANINE-base's 16384 (and 870 of the tiny model's
# 2048): read as its lowest printable codepoint, a base model's 学 came back as U+1B66.
HAN, BALINESE = "学", "\u1b66"


def test_a_bucket_is_answered_by_the_training_datas_most_frequent_character(tmp_path):
    model = _model("char")
    assert ord(HAN) % 2048 == ord(BALINESE) % 2048
    inventory = {"split": "train", "codepoints": 20, "complete": True,
                 "counts": [[ord(HAN), 9], [ord("中"), 5], [ord("文"), 3], [ord(BALINESE), 2], [ord("a"), 1]]}
    export_hf(model, tmp_path / "c", char_inventory=inventory)
    assert json.loads((tmp_path / "c" / hf_masked.INVENTORY_FILE).read_text()) == inventory
    masked = hf_masked.CanineForMaskedPrediction.from_pretrained(tmp_path / "c").eval()
    answers = masked.bucket_answers()
    assert answers[870] == ord(HAN)  # the more frequent of the two
    assert int((answers >= 0).sum()) == 4 and answers[ord("a") % 2048] == ord("a")
    # Without an inventory: the lowest printable codepoint, as before.
    bare = hf_masked.CanineForMaskedPrediction.from_pretrained(_export(model, tmp_path / "bare")).eval()
    assert bare.bucket_answers()[870] == next(c for c in range(870, 0x110000, 2048) if chr(c).isprintable())
    text = "北京大_是中国的大_。"
    answer = masked.fill(text)
    assert len(answer) == 2 and set(answer) <= {HAN, "中", "文", "a"}
    # fill is the best of candidates: scores (bucket probabilities) best first, one answer per bucket.
    ids = torch.tensor([schema.CLS, *[schema.MASK if c == "_" else ord(c) for c in text], schema.SEP])
    positions, candidates = masked.candidates(ids, top_k=3)
    assert [c[0][0] for c in candidates] == answer and positions == [4, 10]
    for row in candidates:
        scores = [score for _, score, _ in row]
        assert scores == sorted(scores, reverse=True) and len({ord(t) % 2048 for t, _, _ in row}) == 3
    assert set(masked.fill(text, alphabet="ab")) <= {"a", "b"}  # alphabet= still overrides


def _export(model, path):
    export_hf(model, path)
    return path


_PIPELINE = """
import json
from transformers import pipeline
out = {}
for name, path in PATHS.items():
    fill = pipeline("fill-mask", model=path, trust_remote_code=True)
    m = fill.tokenizer.mask_token
    out[name] = [fill("The capital of France is P" + m * 4 + ".", top_k=3), fill("Paris is " + m + " city", top_k=2)]
    try:
        fill("no mask")
    except Exception as e:
        out[name].append(str(e))
print(json.dumps(out))
"""


def test_transformers_fill_mask_pipeline_runs_offline_on_both_objectives(tmp_path):
    texts = ["the capital of france is paris", "paris is a city in france", "a city of lights"] * 20
    tokenizer = train_wordpiece(texts, vocab_size=120)
    (tmp_path / "data").mkdir()
    tokenizer.save(str(tmp_path / "data" / schema.TOKENIZER))
    vocab = subword_vocab_of(str(tmp_path / "data"))
    inventory = {"counts": [[ord(c), 100 - i] for i, c in enumerate("aeiostrnl cpfyPu.")]}
    export_hf(_model("char"), tmp_path / "c", char_inventory=inventory)
    export_hf(_model("subword", num_subword_vocab=len(vocab)), tmp_path / "s", subword_vocab=vocab)
    config = json.loads((tmp_path / "c" / "config.json").read_text())
    assert config["custom_pipelines"]["fill-mask"]["impl"] == f"{MASKED_MODULE}.CanineFillMaskPipeline"

    paths = {"c": str(tmp_path / "c"), "s": str(tmp_path / "s")}
    done = _run_as_a_user(tmp_path, f"PATHS = {paths!r}\n" + _PIPELINE, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.splitlines()[-1])

    mask = chr(schema.MASK)
    char, subword = (hf_masked.CanineForMaskedPrediction.from_pretrained(tmp_path / n).eval() for n in "cs")
    text = "The capital of France is P" + mask * 4 + "."
    ids = torch.tensor([schema.CLS, *map(ord, text), schema.SEP])
    _, expected = char.candidates(ids, top_k=3)
    four, one, refused = got["c"]
    assert len(four) == 4 and all(len(row) == 3 for row in four)  # a list per masked character, top_k each
    best = [row[0][0] for row in expected]
    for row, want in zip(four, expected):
        assert [(p["token_str"], p["token"]) for p in row] == [(t, i) for t, _, i in want]
        assert all(abs(p["score"] - s) < 1e-6 for p, (_, s, _) in zip(row, want))
        assert set(p["token_str"] for p in row) <= set("aeiostrnl cpfyPu.")
    assert four[0][1]["sequence"] == f"The capital of France is P{four[0][1]['token_str']}{''.join(best[1:])}."
    assert isinstance(one, list) and len(one) == 2 and isinstance(one[0], dict)  # one mask: one list
    assert "No mask_token" in refused

    word, single, refused = got["s"]  # a run of masks is one subword
    assert len(word) == 3 and isinstance(word[0], dict)
    _, expected = subword.candidates(ids, top_k=3)
    assert [(p["token_str"], p["token"]) for p in word] == [(t, i) for t, _, i in expected[0]]
    assert all(p["token_str"] == vocab[p["token"]] for p in word)
    assert word[0]["sequence"] == f"The capital of France is P{word[0]['token_str'].removeprefix('##')}."
    assert len(single) == 2 and "No mask_token" in refused


_SAVE_AGAIN = """
import json, logging, os
from transformers import AutoModel, AutoModelForMaskedLM, pipeline
logging.getLogger("transformers").setLevel(logging.ERROR)  # the load report is read from its info here
out = {}
for name, path in PATHS.items():
    new = path + "-saved"
    AutoModelForMaskedLM.from_pretrained(path, trust_remote_code=True).save_pretrained(new)
    _, info = AutoModel.from_pretrained(new, output_loading_info=True)
    fill = pipeline("fill-mask", model=new, trust_remote_code=True)
    m = fill.tokenizer.mask_token
    out[name] = {"files": sorted(os.listdir(new)), "unexpected": sorted(info["unexpected_keys"]),
                 "missing": sorted(info["missing_keys"]), "fill": fill(TEXT[name].replace("_", m), top_k=3),
                 "targets": fill(TEXT[name].replace("_", m), targets=TARGETS[name], top_k=9)}
    for wrong in ({"targets": WRONG[name]}, {"topk": 3}):
        try:
            fill(TEXT[name].replace("_", m), **wrong)
        except Exception as e:
            out[name].setdefault("refused", []).append(f"{type(e).__name__}: {e}")
print(json.dumps(out))
"""


def test_save_pretrained_keeps_the_export_and_targets_are_honoured(tmp_path):
    """What a transformers user does with a loaded export: save_pretrained
    dropped char_inventory.json (a Chinese blank was then answered with an Arabic letter) and put
    the head's 18 tensors in model.safetensors (AutoModel: 18 unexpected keys); fill-mask's
    targets= was ignored (the top 5 of all characters). Saved again: the export's files, the head
    in its own file, the same answers; targets limit and score the answers, a wrong one refused."""
    texts = ["the capital of france is paris", "paris is a city in france", "a city of lights"] * 20
    tokenizer = train_wordpiece(texts, vocab_size=120)
    (tmp_path / "data").mkdir()
    tokenizer.save(str(tmp_path / "data" / schema.TOKENIZER))
    vocab = subword_vocab_of(str(tmp_path / "data"))
    inventory = {"split": "train", "codepoints": 99, "complete": True,
                 "counts": [[ord(c), 100 - i] for i, c in enumerate("北京是中国的首都。" + HAN)]}
    export_hf(_model("char"), tmp_path / "c", char_inventory=inventory)
    export_hf(_model("subword", num_subword_vocab=len(vocab)), tmp_path / "s", subword_vocab=vocab)
    text = {"c": "北京是中国的首_。", "s": "the capital of france is _____"}
    targets = {"c": ["都", "国", HAN], "s": ["paris", "city"]}
    paths = {n: str(tmp_path / n) for n in "cs"}
    code = (f"PATHS = {paths!r}\nTEXT = {text!r}\nTARGETS = {targets!r}\nWRONG = {{'c': ['都城'], 's': ['london']}}\n"
            + _SAVE_AGAIN)
    done = _run_as_a_user(tmp_path, code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.splitlines()[-1])
    mask = chr(schema.MASK)
    for name in "cs":
        saved = got[name]
        exported = set(os.listdir(tmp_path / name)) - {"canine_export.json", "tokenizer_config.json"}
        assert set(saved["files"]) == exported, saved["files"]  # nothing the model reads is lost
        assert saved["unexpected"] == [] and saved["missing"] == []
        new = tmp_path / f"{name}-saved"
        with safe_open(new / "model.safetensors", "pt") as f, safe_open(tmp_path / name / "model.safetensors", "pt") as g:
            assert set(f.keys()) == set(g.keys())  # the encoder alone
        for kept in (hf_masked.HEAD_FILE, hf_masked.INVENTORY_FILE if name == "c" else hf_masked.SUBWORD_VOCAB_FILE):
            assert (new / kept).read_bytes() == (tmp_path / name / kept).read_bytes(), kept
        model = hf_masked.CanineForMaskedPrediction.from_pretrained(tmp_path / name).eval()
        ids = torch.tensor([schema.CLS, *[schema.MASK if c == "_" else ord(c) for c in text[name]], schema.SEP])
        _, expected = model.candidates(ids, top_k=3)
        assert [p["token_str"] for p in saved["fill"]] == [t for t, _, _ in expected[0]]  # as the export answers
        answered = saved["targets"]
        assert sorted(p["token_str"] for p in answered) == sorted(targets[name])  # top_k=9: all, and only them
        scores = [p["score"] for p in answered]
        assert scores == sorted(scores, reverse=True)
        _, limited = model.candidates(ids, top_k=9, targets=targets[name])
        assert [(p["token_str"], p["token"]) for p in answered] == [(t, i) for t, _, i in limited[0]]
        assert all(p["sequence"] == text[name].replace("_" * (5 if name == "s" else 1), p["token_str"])
                   for p in answered)
        first, unknown = saved["refused"]
        assert first.startswith("ValueError: targets [") and unknown.startswith("TypeError: fill-mask: no parameter topk")
    assert set(got["c"]["fill"][0]["token_str"]) <= set("北京是中国的首都。" + HAN)  # the data's characters, not U+1B66
    # Two targets of one bucket score alike: each answered, neither hidden by the other.
    char = hf_masked.CanineForMaskedPrediction.from_pretrained(tmp_path / "c").eval()
    ids = torch.tensor([schema.CLS, *map(ord, "北京大" + mask), schema.SEP])
    _, [row] = char.candidates(ids, top_k=5, targets=[HAN, BALINESE, "a"])
    assert {t for t, _, _ in row} == {HAN, BALINESE, "a"}
    assert dict((t, s) for t, s, _ in row)[HAN] == dict((t, s) for t, s, _ in row)[BALINESE]
