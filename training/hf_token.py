"""transformers' token-classification pipeline with character offsets, for `trust_remote_code`.

canine-pretrain copies this file into an export of a fine-tuned token classifier as
pipeline_canine_token.py (training/hf.py `export_token_classifier`); config.json's
`custom_pipelines` points the "token-classification" task (and its alias "ner") at
`CanineTokenClassificationPipeline` below:

    from transformers import pipeline
    ner = pipeline("token-classification", model=PATH, aggregation_strategy="simple", trust_remote_code=True)
    ner("Ana lives in New York.")
    # [{"entity_group": "PER", "score": ..., "word": "Ana", "start": 0, "end": 3},
    #  {"entity_group": "LOC", "score": ..., "word": "New York", "start": 13, "end": 21}]

The model is transformers' own CanineForTokenClassification; only the pipeline is ours.
transformers' TokenClassificationPipeline gives `start` / `end` only with a fast tokenizer's
offsets (transformers 5.23, pipelines/token_classification.py `preprocess`:
`return_offsets_mapping=self.tokenizer.is_fast`), and CANINE has only a slow one, so there they
come back None. A CANINE token is a character: token i + 1 (after CLS) is character i of the
text, its offsets (i, i + 1). This pipeline adds them to each input where a fast tokenizer's
would be, and transformers' pipeline does everything else as it does for any model.
A text longer than the tokenizer's model_max_length is cut there, as transformers does for any
slow tokenizer (its `stride=` needs a fast one). With `batch_size=` texts are padded to one
length, and CANINE's answer for a text can change with padding: a text whose length is not a
multiple of the downsampling rate has a partial last molecule, which padding fills.

It imports only torch and transformers, so it runs where canine-pretrain is not installed.
"""

from __future__ import annotations  # `int | None` on Python 3.9, which transformers 4.x supports

import torch
from transformers import TokenClassificationPipeline


def char_offsets(text: str, input_ids, special_tokens_mask) -> torch.Tensor:
    """(1, L, 2) offsets into `text` of the tokens `input_ids` (1, L) that CanineTokenizer made
    of it: the k-th non-special token is character k, (k, k + 1); special tokens (0, 0), as a
    fast tokenizer gives them. Refuses tokens that are not the text's characters in order (a
    tokenizer that changed the text would make every offset after the change wrong)."""
    ids = torch.as_tensor(input_ids).reshape(-1)
    special = torch.as_tensor(special_tokens_mask).reshape(-1).bool()
    chars = ids[~special].tolist()
    if "".join(map(chr, chars)) != text[: len(chars)]:
        raise ValueError("the tokenizer's tokens are not the text's characters: character offsets would be wrong")
    start = torch.cumsum((~special).long(), 0) - 1  # (L,) the character index of each non-special token
    offsets = torch.stack([start, start + 1], -1) * (~special).long()[:, None]  # (L, 2), (0, 0) where special
    return offsets[None]


class CanineTokenClassificationPipeline(TokenClassificationPipeline):
    """TokenClassificationPipeline with CANINE's character offsets (the module docstring).
    `offset_mapping=` given in the call is used as transformers uses it."""

    def preprocess(self, sentence, offset_mapping=None, **preprocess_params):
        for model_inputs in super().preprocess(sentence, offset_mapping=offset_mapping, **preprocess_params):
            if model_inputs.get("offset_mapping") is None:
                model_inputs["offset_mapping"] = char_offsets(
                    sentence, model_inputs["input_ids"], model_inputs["special_tokens_mask"])
            yield model_inputs
