"""A fine-tuned token classifier exports as transformers' CanineForTokenClassification
(training/hf.py `export_token_classifier`): AutoModelForTokenClassification loads it with nothing
missing or left over and gives our logits, and transformers' token-classification pipeline (with
the export's own pipeline, training/hf_token.py) finds whole entities, with character offsets, in
raw text, offline and without canine-pretrain installed."""

import json
import os
import subprocess
import sys

import pytest
import torch
from transformers import AutoModelForTokenClassification, AutoTokenizer, CanineTokenizer

from contract import schema
from training import hf_token
from training.canine_config import of_size
from training.downstream import IGNORE, CanineForTokenClassification
from training.hf import EXPORT_MARKER, TOKEN_MODULE, TOKEN_PIPELINE, export_token_classifier

from canine_fixtures import one_thread, padded_inputs  # noqa: F401 (autouse fixture)

LABELS = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")
# Words with their BIO tags: entities of one, two and three words, first, inside and last.
SENTENCES = (
    (("Ana", "B-PER"), ("lives", "O"), ("in", "O"), ("New", "B-LOC"), ("York", "I-LOC")),
    (("Paris", "B-LOC"), ("is", "O"), ("where", "O"), ("Jean", "B-PER"), ("Dupont", "I-PER"), ("works", "O")),
    (("Maria", "B-PER"), ("met", "O"), ("Ana", "B-PER"), ("in", "O"), ("Rio", "B-LOC"), ("de", "I-LOC"),
     ("Janeiro", "I-LOC")),
)
# Both sides run fp32 and differ only in their kernels' summation order (tests/training/test_hf.py).
ATOL = 1e-5  # measured 2.4e-6 on this machine kind (AMD EPYC), logits up to 4.4


def _characters(words) -> tuple[str, list[str]]:
    """(text, a label per character): a word's first character carries its tag, its other
    characters I-TYPE inside an entity, else O; the space before a word that continues an
    entity is I-TYPE, any other space O."""
    text, labels = "", []
    for i, (word, tag) in enumerate(words):
        inside = "O" if tag == "O" else "I-" + tag[2:]
        if i:
            text += " "
            labels.append(inside if tag.startswith("I-") else "O")
        text += word
        labels += [tag] + [inside] * (len(word) - 1)
    return text, labels


def _entities(words) -> list[tuple[str, str, int, int]]:
    """(type, text, start, end) of each entity of the words' tags."""
    text, labels = _characters(words)
    found = []
    for i, label in enumerate(labels):
        if label.startswith("B-"):
            found.append([label[2:], i, i + 1])
        elif label.startswith("I-"):
            found[-1][2] = i + 1
    return [(kind, text[start:end], start, end) for kind, start, end in found]


def _batch(sentences) -> dict[str, torch.Tensor]:
    """CLS text SEP per sentence, right-padded, labels IGNORE outside the text."""
    encoded = [_characters(words) for words in sentences]
    L = max(len(text) for text, _ in encoded) + 2
    ids = torch.zeros(len(encoded), L, dtype=torch.long)
    labels = torch.full_like(ids, IGNORE)
    for i, (text, tags) in enumerate(encoded):
        ids[i, : len(text) + 2] = torch.tensor([schema.CLS, *map(ord, text), schema.SEP])
        labels[i, 1 : len(text) + 1] = torch.tensor([LABELS.index(t) for t in tags])
    return {"input_ids": ids, "attention_mask": (ids != 0).long(), "labels": labels}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(our model, its export): the tiny model trained on SENTENCES until it labels every
    character right with some margin, each sentence alone and all three padded to one length
    (22 steps, 2 s here), then exported. Both, because CANINE's outputs depend on the
    padding: a text whose length is not a multiple of the downsampling rate r has a partial last
    molecule, which padding fills (measured on the untrained tiny model: logits 0.28 apart with
    one padding character), and the pipeline reads a sentence alone or, with batch_size, padded."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        model = CanineForTokenClassification(of_size("tiny"), len(LABELS)).eval()  # eval: no dropout
        batches = [_batch([words]) for words in SENTENCES] + [_batch(SENTENCES)]
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        for _ in range(300):
            outs = [model(batch) for batch in batches]
            losses = [out.loss_sum / out.count for out in outs]
            if all(out.correct == out.count for out in outs) and max(losses) < 0.05:
                break
            optimizer.zero_grad()
            sum(losses).backward()
            optimizer.step()
        assert all(out.correct == out.count for out in outs), "the tiny model did not learn the three sentences"
        path = str(tmp_path_factory.mktemp("ner") / "export")
        export_token_classifier(model, path, dict(enumerate(LABELS)), max_length=256)
    finally:
        torch.set_num_threads(threads)
    return model, path


def test_export_loads_as_transformers_token_classifier_with_our_logits(trained):
    model, path = trained
    theirs, info = AutoModelForTokenClassification.from_pretrained(path, output_loading_info=True)
    assert type(theirs).__name__ == "CanineForTokenClassification"
    assert not any(info.values()), info  # missing_keys, unexpected_keys, mismatched_keys, error_msgs
    assert theirs.config.id2label == dict(enumerate(LABELS))
    assert theirs.config.label2id == {name: i for i, name in enumerate(LABELS)}
    config = json.loads(open(os.path.join(path, "config.json")).read())
    assert config["architectures"] == ["CanineForTokenClassification"]
    assert config["hidden_act"] == model.config.hidden_act == "gelu_new"  # as trained, not HF's default "gelu"
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert isinstance(tokenizer, CanineTokenizer) and tokenizer.model_max_length == 256
    with open(hf_token.__file__, "rb") as f:
        assert open(os.path.join(path, f"{TOKEN_MODULE}.py"), "rb").read() == f.read()
    assert f"{TOKEN_MODULE}.py" in json.loads(open(os.path.join(path, EXPORT_MARKER)).read())["files"]

    theirs.eval()
    batch = _batch(SENTENCES)  # padded: the sentences are 21, 32 and 31 characters
    # and random text over several local-attention blocks, the second row padding from 61 on
    ids, mask, types = padded_inputs(133, (133, 61))
    for ids, mask, types in [(batch["input_ids"], batch["attention_mask"], None), (ids, mask, types)]:
        with torch.no_grad():
            ours = model.logits(ids, mask, types)
            logits = theirs(input_ids=ids, attention_mask=mask, token_type_ids=types).logits
        assert logits.shape == ours.shape == (*ids.shape, len(LABELS))
        valid = mask.bool()
        assert (ours - logits).abs()[valid].max().item() <= ATOL
    for batch in [_batch([words]) for words in SENTENCES] + [batch]:  # the labels learnt, alone and padded
        labelled = batch["labels"] != IGNORE
        with torch.no_grad():
            predicted = theirs(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits.argmax(-1)
        assert torch.equal(predicted[labelled], batch["labels"][labelled])


def test_export_refuses_labels_that_do_not_name_the_classes(tmp_path):
    model = CanineForTokenClassification(of_size("tiny"), 3)
    for id2label in [{0: "O", 1: "B-PER"}, {0: "O", 1: "B-PER", 3: "I-PER"}, {0: "O", 1: "B-PER", 2: "O"}]:
        with pytest.raises(ValueError, match="id2label"):
            export_token_classifier(model, tmp_path / "export", id2label)
    assert not (tmp_path / "export").exists()


def test_char_offsets_are_the_characters_and_special_tokens_are_zero():
    tokenizer = CanineTokenizer(model_max_length=8)
    text = "Ana ist  hier"  # truncated to its first 6 characters
    enc = tokenizer(text, truncation=True, return_special_tokens_mask=True, return_tensors="pt")
    offsets = hf_token.char_offsets(text, enc["input_ids"], enc["special_tokens_mask"])
    assert offsets.tolist() == [[[0, 0], [0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [0, 0]]]
    with pytest.raises(ValueError, match="not the text's characters"):
        hf_token.char_offsets("Ana", torch.tensor([[schema.CLS, ord("A"), ord("m"), ord("a"), schema.SEP]]),
                              torch.tensor([[1, 0, 0, 0, 1]]))


# The user's side: canine-pretrain's packages made unimportable (a user of an export may not have
# them), transformers' hub and module caches in the test's folder, offline.
_NOT_INSTALLED = "import sys; sys.modules.update(dict.fromkeys(['training', 'contract', 'pipeline', 'jobs']))\n"
_PIPELINE = """
import json
from transformers import pipeline
ner = pipeline("token-classification", model=PATH, aggregation_strategy="simple", trust_remote_code=True)
out = {"class": type(ner).__name__, "one": ner(TEXTS[0]), "all": ner(TEXTS), "batched": ner(TEXTS, batch_size=3)}
out["alias"] = type(pipeline("ner", model=PATH, trust_remote_code=True)).__name__
try:
    pipeline("token-classification", model=PATH, aggregation_strategy="simple")
except ValueError as e:
    out["refused"] = str(e)
print(json.dumps(out, default=float))
"""


def test_pipeline_gives_whole_entities_with_character_offsets_on_raw_text(trained, tmp_path):
    _, path = trained
    texts = [_characters(words)[0] for words in SENTENCES]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf_home"), HF_MODULES_CACHE=str(tmp_path / "modules"))
    done = subprocess.run([sys.executable, "-c", f"{_NOT_INSTALLED}PATH = {path!r}\nTEXTS = {texts!r}\n{_PIPELINE}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.splitlines()[-1])

    assert got["class"] == got["alias"] == TOKEN_PIPELINE
    expected = [_entities(words) for words in SENTENCES]
    assert expected[0] == [("PER", "Ana", 0, 3), ("LOC", "New York", 13, 21)]
    for answer in [[got["one"]], got["all"], got["batched"]]:  # each sentence its own offsets
        assert [[(e["entity_group"], e["word"], e["start"], e["end"]) for e in entities]
                for entities in answer] == expected[: len(answer)]
    for text, entities in zip(texts, got["all"]):
        assert all(text[e["start"]: e["end"]] == e["word"] for e in entities)
        assert all(0.5 < e["score"] <= 1 for e in entities)
    assert "trust_remote_code=True" in got["refused"]  # not a quiet answer without offsets
