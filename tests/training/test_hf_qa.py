"""A model fine-tuned on TyDi QA exports for transformers (training/hf.py `export_question_answerer`):
transformers' CanineForQuestionAnswering loads it with only the answer-type layer left over and gives
our start and end logits; AutoModelForQuestionAnswering with trust_remote_code loads the export's own
model (training/hf_qa.py), nothing missing, and its `answer` reads a raw document as the training
windows are built and answers from it, offline and without canine-pretrain installed."""

import json
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
import torch
from transformers import CanineForQuestionAnswering

from contract import schema
from contract.tydiqa import AnswerType, Example
from pipeline.downstream.windows import WindowSettings, window_example
from training import hf_qa
from training.canine_config import of_size
from training.downstream import CanineForTydiQA, min_padded_length
from training.hf import EXPORT_MARKER, QA_AUTO_CLASS, QA_CLASS, QA_MODULE, export_question_answerer

from canine_fixtures import one_thread, padded_inputs  # noqa: F401 (autouse fixture)

DOCUMENT = ("Ana lives in New York.\n\n"
            "  She works in a bakery near the park.  \n"
            "The bakery opens at six and closes at noon.\n")
# (question, answer): each answer's first occurrence in DOCUMENT
QUESTIONS = (("Where does Ana live?", "New York"), ("Where does she work?", "a bakery"))
ATOL = 1e-5  # fp32 both sides, kernels' summation order only (tests/training/test_hf_token.py)


def _batch(rows) -> dict[str, torch.Tensor]:
    """hf_qa windows as a batch, each padded as `answer` pads it (min_padded_length)."""
    config = of_size("tiny")
    L = max(min_padded_length(config, len(row.input_ids)) for row in rows)
    ids = torch.zeros(len(rows), L, dtype=torch.long)
    types = torch.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row.input_ids)] = torch.tensor(row.input_ids)
        types[i, : len(row.input_ids)] = torch.tensor(row.token_type_ids)
    return {"input_ids": ids, "attention_mask": (ids != 0).long(), "token_type_ids": types}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(our model, its export): the tiny model trained on the two questions' windows of DOCUMENT
    until both answers are its best spans (98 steps, 4 s here), then exported."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        model = CanineForTydiQA(of_size("tiny")).eval()  # eval: no dropout
        rows, labels = [], []
        for question, answer in QUESTIONS:
            _, (row,) = hf_qa.windows(question, DOCUMENT)
            start = row.offsets.index(DOCUMENT.index(answer))
            rows.append(row)
            labels.append((start, start + len(answer) - 1, AnswerType.MINIMAL))
        batch = _batch(rows)
        batch.update(zip(("start_positions", "end_positions", "answer_types"), torch.tensor(labels).T))
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        for _ in range(200):
            out = model(batch)
            if (out.start_logits.argmax(-1) == batch["start_positions"]).all() and \
                    (out.end_logits.argmax(-1) == batch["end_positions"]).all() and out.loss_sum / out.count < 0.05:
                break
            optimizer.zero_grad()
            (out.loss_sum / out.count).backward()
            optimizer.step()
        assert out.loss_sum / out.count < 0.05, "the tiny model did not learn the two answers"
        path = str(tmp_path_factory.mktemp("tydiqa") / "export")
        export_question_answerer(model, path, max_length=256)
    finally:
        torch.set_num_threads(threads)
    return model, path


def test_export_loads_as_transformers_question_answering_with_our_logits(trained):
    model, path = trained
    theirs, info = CanineForQuestionAnswering.from_pretrained(path, output_loading_info=True)
    assert type(theirs).__name__ == "CanineForQuestionAnswering"
    assert not info["missing_keys"] and not info["mismatched_keys"] and not info["error_msgs"], info
    assert set(info["unexpected_keys"]) == {"answer_type_output.weight", "answer_type_output.bias"}
    config = json.loads(open(os.path.join(path, "config.json")).read())
    assert config["auto_map"] == {QA_AUTO_CLASS: f"{QA_MODULE}.{QA_CLASS}"}
    assert config["tydiqa"] == {**hf_qa.DEFAULTS, "max_length": 256}
    assert config["hidden_act"] == model.config.hidden_act == "gelu_new"  # as trained, not HF's default "gelu"
    tokenizer = json.loads(open(os.path.join(path, "tokenizer_config.json")).read())  # (building one takes 3 s)
    assert tokenizer["tokenizer_class"] == "CanineTokenizer" and tokenizer["model_max_length"] == 256
    with open(hf_qa.__file__, "rb") as f:
        assert open(os.path.join(path, f"{QA_MODULE}.py"), "rb").read() == f.read()
    assert f"{QA_MODULE}.py" in json.loads(open(os.path.join(path, EXPORT_MARKER)).read())["files"]

    theirs.eval()
    ids, mask, types = padded_inputs(133, (133, 61))  # over several local blocks, the second row padded
    with torch.no_grad():
        start, end, _ = model.logits(ids, mask, types)
        out = theirs(input_ids=ids, attention_mask=mask, token_type_ids=types)
    valid = mask.bool()  # ours are PADDING_LOGIT at padding, transformers' are not masked
    torch.testing.assert_close(out.start_logits[valid], start[valid], rtol=1e-5, atol=ATOL)
    torch.testing.assert_close(out.end_logits[valid], end[valid], rtol=1e-5, atol=ATOL)


def test_answer_reads_a_document_as_the_training_windows_are_built():
    """hf_qa.windows against pipeline/downstream/windows.py (what canine finetune tydiqa trains on)
    with the document's lines as the passage candidates: the same rows, character for character,
    in one window and in several; aliased characters replaced alike; the question's last characters."""
    document = "First line\ue003 here.\n\nSecond one, a bit longer than the first.\nThird.\n" * 3
    question = "Which line comes second?\x00" * 3
    passages = hf_qa.split_passages(document)
    assert [document[s:e] for s, e in passages[:3]] == ["First line\ue003 here.",
                                                        "Second one, a bit longer than the first.", "Third."]
    example = Example(example_id=7, language="english", question=question, document=document, passages=passages,
                      annotations=[])
    for max_length, stride, max_question in ((2048, 512, 256), (96, 24, 20)):
        settings = WindowSettings(max_length=max_length, stride=stride, max_question=max_question)
        theirs = window_example(example, settings, training=False, counts=Counter())
        read, ours = hf_qa.windows(question, document, max_length, stride, max_question)
        assert read == passages and len(ours) == len(theirs) and (len(ours) > 3) == (max_length == 96)
        for mine, row in zip(ours, theirs):
            assert mine.input_ids == row.input_ids.tolist() and len(mine.input_ids) <= max_length
            assert mine.offsets == row.doc_chars.tolist()
            assert mine.token_type_ids == (np.arange(len(row.input_ids)) >= row.doc_start).astype(int).tolist()
        assert ours[0].input_ids[1: 2 + min(max_question, len(question))] == [
            hf_qa.QUESTION, *[0xFFFD if c == "\x00" else ord(c) for c in question[-max_question:]]]
        assert schema.MASK not in ours[0].input_ids  # U+E003 in the text is U+FFFD, as in training


# The user's side: canine-pretrain's packages made unimportable (a user of an export may not have
# them), transformers' hub and module caches in the test's folder, offline.
_NOT_INSTALLED = "import sys; sys.modules.update(dict.fromkeys(['training', 'contract', 'pipeline', 'jobs']))\n"
_USER = """
import json, torch
from transformers import AutoModelForQuestionAnswering
model, info = AutoModelForQuestionAnswering.from_pretrained(PATH, trust_remote_code=True, output_loading_info=True)
out = {"class": type(model).__name__, "info": {k: sorted(v) for k, v in info.items()}}
out["answers"] = [model.answer(q, DOCUMENT) for q, _ in QUESTIONS]
out["windowed"] = model.answer(QUESTIONS[0][0], DOCUMENT, max_length=40, stride=8)
out["empty"] = model.answer(QUESTIONS[0][0], "  \\n\\n ")
ids = torch.tensor(IDS)
with torch.no_grad():
    logits = model(input_ids=ids, attention_mask=(ids != 0).long(), token_type_ids=torch.tensor(TYPES))
out["type_logits"] = logits.answer_type_logits.tolist()
out["start_logits"] = logits.start_logits.tolist()
print(json.dumps(out))
"""


def test_the_exports_model_answers_a_raw_document_offline(trained, tmp_path):
    model, path = trained
    ids, mask, types = padded_inputs(133, (133, 61))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf_home"), HF_MODULES_CACHE=str(tmp_path / "modules"))
    script = (f"{_NOT_INSTALLED}PATH = {path!r}\nDOCUMENT = {DOCUMENT!r}\nQUESTIONS = {QUESTIONS!r}\n"
              f"IDS = {ids.tolist()!r}\nTYPES = {types.tolist()!r}\n{_USER}")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.splitlines()[-1])

    assert got["class"] == QA_CLASS
    assert not any(got["info"].values()), got["info"]  # nothing missing, unexpected or mismatched
    with torch.no_grad():
        start, _, type_logits = model.logits(ids, mask, types)
    torch.testing.assert_close(torch.tensor(got["type_logits"]), type_logits, rtol=1e-5, atol=ATOL)
    torch.testing.assert_close(torch.tensor(got["start_logits"]), start, rtol=1e-5, atol=ATOL)  # padding too

    passages = [list(p) for p in hf_qa.split_passages(DOCUMENT)]
    for (question, answer), said in zip(QUESTIONS, got["answers"]):
        start = DOCUMENT.index(answer)
        assert said == {"answer": answer, "start": start, "end": start + len(answer), "score": said["score"],
                        "type": "minimal", "passage": said["passage"]}, question
        assert said["passage"] in passages and said["passage"][0] <= start < said["end"] <= said["passage"][1]
        assert said["score"] > 0  # the span beats [CLS]
    windowed = got["windowed"]  # windows of 40 characters: the document is read in several
    assert len(hf_qa.windows(QUESTIONS[0][0], DOCUMENT, 40, 8)[1]) > 3
    assert windowed["answer"] == DOCUMENT[windowed["start"]: windowed["end"]] and windowed["answer"]
    assert windowed["passage"] in passages
    assert windowed["passage"][0] <= windowed["start"] < windowed["end"] <= windowed["passage"][1]
    assert windowed["type"] in hf_qa.ANSWER_TYPES
    assert got["empty"] == {"answer": "", "start": None, "end": None, "score": None, "type": "null", "passage": None}
