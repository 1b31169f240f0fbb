"""CANINE with its pretraining head, for transformers' `trust_remote_code`: masked prediction.

canine-pretrain copies this file into an export of a pretraining run as modeling_canine_masked.py;
config.json's `auto_map` points `AutoModelForMaskedLM` at `CanineForMaskedPrediction`:

    from transformers import pipeline
    fill = pipeline("fill-mask", model=PATH, trust_remote_code=True)
    fill(f"The capital of France is P{fill.tokenizer.mask_token * 4}.")   # top-k per masked character

    from transformers import AutoModelForMaskedLM
    model = AutoModelForMaskedLM.from_pretrained(PATH, trust_remote_code=True)
    model.fill("The capital of France is P____.")   # CANINE-C: one character per "_"

config.json's `custom_pipelines` points the "fill-mask" task at `CanineFillMaskPipeline` below;
`targets=` limits its answers as transformers' own fill-mask pipeline does. `save_pretrained`
writes the export's layout again (the head in its own file, the character inventory and the
subword vocabulary beside), so a model saved anew loads and answers as the export did.
CANINE-C predicts a hash bucket (codepoint % num_hash_buckets), which several codepoints share;
char_inventory.json, written beside by the export, lists the characters of the training data
with their counts, and a bucket is answered with its most frequent one of them (so 学 stays a
Han character), or with the best of `alphabet=` where one is given.

It imports only torch and transformers, so it runs where canine-pretrain is not installed. The
encoder is transformers' own CanineModel (its weights keep the plain CanineModel names in
model.safetensors, which `AutoModel` loads as a CanineModel, nothing missing or left over). The
head is the run's objective, written out again with the module and tensor names of
canine-pretrain's training/heads.py, so its weights are stored as they were trained, under the
prefix `pretraining_head.`, in a file of their own, pretraining_head.safetensors, which
`from_pretrained` below loads after the encoder (an export written before kept them in
model.safetensors, and loads as it did). config.json's
`pretraining_head` names it: {"objective": "char", "char_reveal": "shifted" | "two_stream"}
(CANINE-C, logits over codepoint % num_hash_buckets) or {"objective": "subword", "vocab_size": V}
(CANINE-S, logits over the subword vocabulary written beside as subword_vocab.json).
"""

from __future__ import annotations  # `int | None` on Python 3.9, which transformers 4.x supports

import json
import os
import shutil

import torch
import torch.nn.functional as F
from torch import nn
from transformers import CanineModel, Pipeline
from transformers.modeling_outputs import MaskedLMOutput

# CANINE's special codepoints (private use area), as CanineTokenizer has them.
CLS, SEP, BOS, MASK = 0xE000, 0xE001, 0xE002, 0xE003
# Hash k of codepoint x is ((x + 1) * PRIMES[k]) % num_hash_buckets (CANINE's hash embedding).
PRIMES = (31, 43, 59, 61, 73, 97, 103, 113, 137, 149, 157, 173, 181, 193, 211, 223)
HEAD_FILE = "pretraining_head.safetensors"  # the head's tensors, under their state-dict names
SUBWORD_VOCAB_FILE = "subword_vocab.json"  # the CANINE-S vocabulary: a JSON list of tokens by id
# The training data's characters: {"counts": [[codepoint, count], ...] most frequent first, ...}.
INVENTORY_FILE = "char_inventory.json"


def _read_json(path: str, key: str | None = None):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return data[key] if key else data


def gelu(x, name: str):
    """GELU as config.hidden_act names it: exact erf for "gelu", else the tanh approximation."""
    return F.gelu(x, approximate="none" if name == "gelu" else "tanh")


class Transform(nn.Module):
    """dense -> GELU -> LayerNorm (BERT's prediction-head transform)."""

    def __init__(self, config, in_features: int):
        super().__init__()
        self.dense = nn.Linear(in_features, config.hidden_size)
        self.norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.act = config.hidden_act

    def forward(self, x):
        return self.norm(gelu(self.dense(x), self.act))


class TransformerLayer(nn.Module):
    """A post-LayerNorm BERT layer with fused query / key / value rows (in that order)."""

    def __init__(self, config):
        super().__init__()
        d = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.qkv = nn.Linear(d, 3 * d)
        self.attn_out = nn.Linear(d, d)
        self.attn_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.ffn_in = nn.Linear(d, config.intermediate_size)
        self.ffn_out = nn.Linear(config.intermediate_size, d)
        self.ffn_norm = nn.LayerNorm(d, eps=config.layer_norm_eps)
        self.act = config.hidden_act
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.attention_dropout = config.attention_probs_dropout_prob

    def forward(self, x, visible, queries: int | None = None):
        """x (B, Lk, d); visible (Lq, Lk) bool, True where a query sees a key; the queries are
        the first `queries` rows of x (all of them by default)."""
        B, Lk, d = x.shape
        H = self.num_heads
        residual = x if queries is None else x[:, :queries]  # (B, Lq, d)
        w_q, w_kv = self.qkv.weight.split([d, 2 * d])
        b_q, b_kv = self.qkv.bias.split([d, 2 * d])
        q = F.linear(residual, w_q, b_q).view(B, -1, H, d // H).transpose(1, 2)  # (B, H, Lq, dh)
        k, v = F.linear(x, w_kv, b_kv).view(B, Lk, 2, H, d // H).permute(2, 0, 3, 1, 4).unbind(0)  # (B, H, Lk, dh)
        dropout_p = self.attention_dropout if self.training else 0.0
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=visible, dropout_p=dropout_p)  # (B, H, Lq, dh)
        h = self.attn_norm(residual + self.dropout(self.attn_out(context.transpose(1, 2).reshape(B, -1, d))))
        return self.ffn_norm(h + self.dropout(self.ffn_out(gelu(self.ffn_in(h), self.act))))


class CharHead(nn.Module):
    """CANINE-C: the predicted positions in a chosen order; each step predicts its character's
    bucket (codepoint % num_hash_buckets) from its position's final encoding and the characters
    of the earlier steps, through [y ; character embedding] -> d and one transformer layer.
    The gold characters' embeddings are the encoder's own hash embeddings.

    `reveal` is how the earlier characters are seen (config.json pretraining_head.char_reveal):
    - "shifted": step t's row is [y(p_t) ; e(g_(t-1))] (BOS at step 0) under a causal mask.
    - "two_stream": step t queries with [y(p_t) ; e(BOS)] (its position, nothing revealed) and
      sees that row plus [y(p_s) ; e(g_s)] of every earlier step s (each character at its own
      position)."""

    def __init__(self, config, reveal: str):
        super().__init__()
        if reveal not in ("shifted", "two_stream"):
            raise ValueError(f"pretraining_head.char_reveal must be 'shifted' or 'two_stream', got {reveal!r}")
        self.reveal = reveal
        self.project = Transform(config, 2 * config.hidden_size)
        self.layer = TransformerLayer(config)
        self.output = nn.Linear(config.hidden_size, config.num_hash_buckets)

    def forward(self, y_steps, gold_steps, embed):
        """y_steps (B, P, d) and gold codepoints (B, P) in step order -> (B, P, d) for `output`.
        Step t never reads gold_steps[:, t:], so a greedy decoder may leave them anything."""
        B, P = gold_steps.shape
        steps = torch.arange(P, device=y_steps.device)
        if self.reveal == "shifted":
            previous = torch.cat([gold_steps.new_full((B, 1), BOS), gold_steps[:, :-1]], dim=1)  # (B, P)
            x = self.project(torch.cat([y_steps, embed(previous)], dim=-1))  # (B, P, d)
            return self.layer(x, visible=steps[None, :] <= steps[:, None])
        nothing = embed(gold_steps.new_full((1, 1), BOS)).expand(B, P, -1)
        queries = self.project(torch.cat([y_steps, nothing], dim=-1))  # (B, P, d)
        content = self.project(torch.cat([y_steps, embed(gold_steps)], dim=-1))  # (B, P, d)
        # Keys 0..P-1: the query rows (step t sees only its own); P..2P-1: content of steps s < t.
        keys = torch.arange(2 * P, device=y_steps.device)
        visible = (keys[None, :] == steps[:, None]) | ((keys[None, :] >= P) & (keys[None, :] - P < steps[:, None]))
        return self.layer(torch.cat([queries, content], dim=1), visible=visible, queries=P)


class SubwordHead(nn.Module):
    """CANINE-S: the final encoding at one character of a masked subword, transform, logits over
    the subword vocabulary."""

    def __init__(self, config, vocab_size: int):
        super().__init__()
        self.transform = Transform(config, config.hidden_size)
        self.output = nn.Linear(config.hidden_size, vocab_size)

    def forward(self, y):
        return self.transform(y)  # (B, P, d) for `output`


class CanineForMaskedPrediction(CanineModel):
    """transformers' CanineModel plus its run's pretraining head (`self.pretraining_head`).

    A CanineModel extended, not one held as `self.canine`: its state dict is then exactly the
    export's model.safetensors, the encoder under the plain CanineModel names, whatever the
    transformers version (4.x refuses a wrapper whose checkpoint has the base model's names
    beside a head's: "The state dictionary ... is corrupted").

    forward(input_ids, ..., positions, gold_ids) gives the head's logits (B, P, classes) at
    `positions` (B, P): CANINE-C, the steps in that order, each having seen the characters
    (codepoints) `gold_ids` (B, P) of the steps before it (teacher forcing, as in pretraining);
    CANINE-S, one prediction per position (default: every position). `encode` is the plain
    CanineModel's forward; `fill(text)` is the fill-in query."""

    # The head is loaded from HEAD_FILE by from_pretrained, after transformers has loaded
    # model.safetensors, where it is not (so not "missing" there).
    _keys_to_ignore_on_load_missing = [r"^pretraining_head\."]

    def __init__(self, config):
        super().__init__(config)
        head = getattr(config, "pretraining_head", None) or {}
        self.objective = head.get("objective")
        if self.objective not in ("char", "subword"):
            raise ValueError("config.json has no pretraining_head.objective ('char' or 'subword'): this export holds "
                             "only the encoder; load it with AutoModel")
        if self.objective == "char":
            self.pretraining_head = CharHead(config, head.get("char_reveal", "shifted"))
        else:
            self.pretraining_head = SubwordHead(config, int(head["vocab_size"]))
        self.subword_vocab = None  # list of tokens by id, read from SUBWORD_VOCAB_FILE on first use
        self.char_inventory = None  # [[codepoint, count], ...], read from INVENTORY_FILE on first use
        self._bucket_answers = {}  # alphabet (or None) -> (num_hash_buckets,) codepoint answering each bucket
        self.post_init()

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """transformers' from_pretrained, then the head's tensors from HEAD_FILE (exactly them:
        a name missing or left over fails). Without that file the head must have been in
        model.safetensors (an older export): an export without its head is refused rather than
        answered by a randomly initialised one."""
        loaded = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        model = loaded[0] if isinstance(loaded, tuple) else loaded  # output_loading_info=True
        path = model._file(HEAD_FILE)
        if path is not None:
            from safetensors.torch import load_file

            tensors = load_file(path)
            model.pretraining_head.load_state_dict(
                {k[len("pretraining_head."):]: v for k, v in tensors.items() if k.startswith("pretraining_head.")},
                strict=True)
        elif not model._head_in_weights():
            raise ValueError(f"{pretrained_model_name_or_path} has no {HEAD_FILE} and its weights hold no "
                             "pretraining_head.* tensors: the head's weights are missing from this export")
        return loaded

    def _head_in_weights(self) -> bool:
        """Whether model.safetensors has the head's tensors (an export written before HEAD_FILE)."""
        path = self._file("model.safetensors")
        if path is None:
            return False
        from safetensors import safe_open

        with safe_open(path, "pt") as f:
            return any(k.startswith("pretraining_head.") for k in f.keys())

    def save_pretrained(self, save_directory, is_main_process: bool = True, state_dict=None, push_to_hub=False,
                        **kwargs):
        """transformers' save_pretrained, in the export's layout: model.safetensors holds the
        encoder alone (a CanineModel's weights, which `AutoModel` loads with nothing unexpected),
        the head goes to HEAD_FILE, and the files `fill` and the pipeline read, INVENTORY_FILE and
        SUBWORD_VOCAB_FILE, are copied from where this model was loaded (or written from what was
        set on it). transformers' own wrote the head's tensors into model.safetensors and left the
        inventory out: a CJK blank was then answered with the bucket's lowest printable codepoint.
        push_to_hub is refused: the head's files would not go up with the rest (save, then
        huggingface_hub's upload_folder)."""
        if push_to_hub:
            raise ValueError("save_pretrained(push_to_hub=True) would upload the weights without "
                             f"{HEAD_FILE} and {INVENTORY_FILE}; save to a directory, then upload it whole: "
                             "huggingface_hub.upload_folder(repo_id=..., folder_path=DIR)")
        state_dict = self.state_dict() if state_dict is None else state_dict
        head = {k: v for k, v in state_dict.items() if k.startswith("pretraining_head.")}
        super().save_pretrained(save_directory, is_main_process=is_main_process,
                                state_dict={k: v for k, v in state_dict.items() if k not in head}, **kwargs)
        if not is_main_process:
            return
        from safetensors.torch import save_file

        save_file({k: v.detach().contiguous() for k, v in head.items()}, os.path.join(save_directory, HEAD_FILE),
                  metadata={"format": "pt"})
        for name, loaded, key in ((INVENTORY_FILE, self.char_inventory, "counts"),
                                  (SUBWORD_VOCAB_FILE, self.subword_vocab, None)):
            target, source = os.path.join(save_directory, name), self._file(name)
            if source is not None and (loaded is None or _read_json(source, key) == loaded):
                if not os.path.exists(target) or not os.path.samefile(source, target):
                    shutil.copyfile(source, target)  # as loaded, byte for byte (the inventory's other keys too)
            elif loaded:  # set on the model by its user: what it answers with
                with open(target, "w", encoding="utf-8") as f:
                    json.dump({key: loaded} if key else loaded, f, ensure_ascii=False, separators=(",", ":"))

    def encode(self, input_ids, attention_mask=None, token_type_ids=None):
        """The encoder's final character encodings (B, L, d)."""
        return super().forward(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state

    def embed_codepoints(self, ids):
        """(..) codepoints -> (.., d): the encoder's hash embeddings (before position and type)."""
        tables, B = self.char_embeddings, self.config.num_hash_buckets
        return torch.cat([getattr(tables, f"HashBucketCodepointEmbedder_{k}")(((ids + 1) * prime) % B)
                          for k, prime in enumerate(PRIMES[: self.config.num_hash_functions])], dim=-1)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, positions=None, gold_ids=None,
                labels=None, return_dict=None, **kwargs):
        """labels (B, P): targets at the steps (CANINE-C: codepoint % num_hash_buckets), -100 = none."""
        hidden = self.encode(input_ids, attention_mask, token_type_ids)  # (B, L, d)
        if positions is None:
            if self.objective == "char":
                raise ValueError("CANINE-C predicts in a reveal order: pass positions and gold_ids (or use fill)")
            positions = torch.arange(hidden.shape[1], device=hidden.device).expand(hidden.shape[0], -1)
        y = hidden.gather(1, positions.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))  # (B, P, d)
        if self.objective == "char":
            if gold_ids is None:
                raise ValueError("CANINE-C needs gold_ids: the characters revealed to the later steps")
            h = self.pretraining_head(y, gold_ids, self.embed_codepoints)
        else:
            h = self.pretraining_head(y)
        logits = self.pretraining_head.output(h)  # (B, P, classes)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
        return MaskedLMOutput(loss=loss, logits=logits)

    @torch.no_grad()
    def fill(self, text: str, mask: str = "_", alphabet: str | None = None) -> list[str]:
        """Predictions for the masked characters of `text`, each occurrence of `mask` being one.

        CANINE-C: one character per masked character, decoded greedily left to right (pretraining
        revealed them in a shuffled order; any order is one the head has learned). The head gives
        a bucket, codepoint % num_hash_buckets, shared by several codepoints: the answer is the
        bucket's most frequent character of the training data (char_inventory.json), or with
        `alphabet` (a string) the best-scoring of its characters; without either, the lowest
        printable codepoint of the bucket. CANINE-S: one subword per run of consecutive masked
        characters (pretraining masked a whole subword, one MASK per character, and read the
        prediction at one of its characters: here the first), from subword_vocab.json."""
        if not mask:
            raise ValueError("mask must be a non-empty string")
        parts = text.split(mask)
        if len(parts) == 1:
            raise ValueError(f"nothing to fill: the text has no {mask!r}")
        ids = [CLS]
        for i, part in enumerate(parts):
            if i:
                ids.append(MASK)
            ids.extend(ord(c) for c in part)
        ids.append(SEP)
        _, answers = self.candidates(torch.tensor(ids), top_k=1, alphabet=alphabet)
        return [best[0][0] for best in answers]

    def target_ids(self, targets) -> list[int]:
        """transformers' fill-mask `targets` (a str or a list of them) as the ids answers are
        limited to, in order, once each: CANINE-C, characters (codepoints); CANINE-S, subwords of
        subword_vocab.json (their index). A target that is not one (a string of several
        characters, a subword not in the vocabulary, none at all) is refused; transformers'
        pipeline would read it as its first token."""
        targets = [targets] if isinstance(targets, str) else list(targets)
        if not targets:
            raise ValueError("targets: at least one target must be given")
        if self.objective == "char":
            wrong = [t for t in targets if not isinstance(t, str) or len(t) != 1]
            if wrong:
                raise ValueError(f"targets {wrong!r}: CANINE-C answers each masked character with one character; "
                                 "give single characters")
            return list(dict.fromkeys(map(ord, targets)))
        index = {token: i for i, token in enumerate(self._subword_vocab())}
        unknown = [t for t in targets if t not in index]
        if unknown:
            raise ValueError(f"targets {unknown!r}: not in the subword vocabulary ({SUBWORD_VOCAB_FILE}); a word "
                             "inside a sentence is a subword as it stands, a later piece of one starts with ##")
        return list(dict.fromkeys(index[t] for t in targets))

    @torch.no_grad()
    def candidates(self, input_ids, top_k: int = 5, alphabet: str | None = None, targets=None):
        """(positions, answers) for one example: `input_ids` (L,) codepoints, CLS ... SEP, MASK at
        the masked characters. CANINE-C: a prediction per masked character, left to right, each
        step having seen the best answers of the steps before it; CANINE-S: one per run of
        consecutive masks, at its first. answers[i]: the top_k (text, score, id) of prediction i,
        best first; score is the probability of the bucket (CANINE-C, id the codepoint) or of the
        subword (CANINE-S, id its index in the vocabulary). `targets` (`target_ids`): only those
        are answered, each scored (top_k at most their number), as transformers' fill-mask does."""
        if targets is not None and alphabet is not None:
            raise ValueError("give targets or alphabet, not both: both limit the answers")
        wanted = None if targets is None else torch.tensor(self.target_ids(targets))
        ids = input_ids.reshape(-1).to(self.device)
        if ids.shape[0] > self.config.max_position_embeddings:
            raise ValueError(f"{ids.shape[0]} characters with CLS and SEP; the model reads at most "
                             f"{self.config.max_position_embeddings}")
        masked = (ids == MASK).nonzero().flatten().tolist()
        if not masked:
            raise ValueError("nothing to fill: no MASK (U+E003) in the input")
        hidden = self.encode(ids[None])  # (1, L, d)
        if self.objective == "subword":
            starts = [p for i, p in enumerate(masked) if i == 0 or masked[i - 1] != p - 1]  # each run's first
            head = self.pretraining_head
            probs = head.output(head(hidden[:, starts]))[0].float().softmax(-1)  # (P, V)
            vocab = self._subword_vocab()
            if wanted is not None:
                values, pick = probs[:, wanted.to(probs.device)].topk(min(top_k, len(wanted)))  # (P, k) of the targets
                best = wanted.to(pick.device)[pick]
            else:
                values, best = probs.topk(min(top_k, probs.shape[-1]))
            return starts, [[(vocab[i], v, i) for v, i in zip(vs, bs)] for vs, bs in zip(values.tolist(), best.tolist())]
        y = hidden[:, masked]  # (1, P, d), steps left to right
        gold = torch.full((1, len(masked)), BOS, device=self.device)  # filled in as they are decided
        head, answers = self.pretraining_head, []
        for t in range(len(masked)):  # steps 0..t depend only on the characters before t
            logits = head.output(head(y[:, : t + 1], gold[:, : t + 1], self.embed_codepoints))[0, t]
            answers.append(self._top_characters(logits, top_k, alphabet) if wanted is None
                           else self._top_targets(logits, top_k, wanted))
            gold[0, t] = answers[-1][0][2]
        return masked, answers

    def _top_characters(self, logits, k: int, alphabet: str | None) -> list[tuple[str, float, int]]:
        """The k best characters of CANINE-C logits over buckets: each bucket answered by one
        character (`bucket_answers`), scored by the bucket's probability."""
        answer = self.bucket_answers(alphabet).to(logits.device)  # (B,)
        probs = logits.float().softmax(-1).masked_fill(answer < 0, -1.0)  # a bucket nothing answers: never chosen
        values, buckets = probs.topk(min(k, int((answer >= 0).sum())))
        return [(chr(int(answer[b])), v, int(answer[b])) for v, b in zip(values.tolist(), buckets.tolist())]

    def _top_targets(self, logits, k: int, codepoints) -> list[tuple[str, float, int]]:
        """The k best of the target characters `codepoints` (K,), each scored by its bucket's
        probability (targets sharing a bucket score alike, listed in the order given)."""
        probs = logits.float().softmax(-1)[codepoints.to(logits.device) % self.config.num_hash_buckets]  # (K,)
        order = sorted(range(len(codepoints)), key=lambda i: -probs[i].item())[:k]
        return [(chr(int(codepoints[i])), probs[i].item(), int(codepoints[i])) for i in order]

    def bucket_answers(self, alphabet: str | None = None) -> torch.Tensor:
        """(num_hash_buckets,) the codepoint that answers each bucket, -1 for none: with `alphabet`,
        its lowest character in the bucket (the others are not answers); else the training data's
        most frequent character of it (char_inventory.json); else, for an export without one, the
        lowest printable codepoint."""
        key = "".join(sorted(set(alphabet))) if alphabet else None
        if key not in self._bucket_answers:
            B = self.config.num_hash_buckets
            answer = torch.full((B,), -1, dtype=torch.long)
            # Candidates in order of preference, the first of each bucket answering it.
            if key:
                codepoints = [ord(c) for c in key]  # lowest first
            elif self._inventory():
                codepoints = [cp for cp, _ in self._inventory()]  # most frequent first
            else:
                codepoints = [c for c in range(1, 0x110000) if chr(c).isprintable()]
            cps = torch.tensor(codepoints, dtype=torch.long)
            rank = torch.arange(len(cps))
            # (not answer[cps % B] = cps: which of repeated indices wins is undefined in index_put_)
            first = torch.full((B,), len(cps)).scatter_reduce(0, cps % B, rank, "amin")  # (B,) best rank per bucket
            hit = first < len(cps)
            answer[hit] = cps[first[hit]]
            self._bucket_answers[key] = answer
        return self._bucket_answers[key]

    def _inventory(self) -> list | None:
        if self.char_inventory is None:
            path = self._file(INVENTORY_FILE)
            if path is None:
                self.char_inventory = []
            else:
                self.char_inventory = _read_json(path, "counts")
        return self.char_inventory

    def _file(self, name: str) -> str | None:
        """A file of the export this model was loaded from, or None."""
        from transformers.utils import cached_file

        where = self.config.name_or_path  # what from_pretrained was given: a directory or a hub name
        try:
            return cached_file(where, name, _raise_exceptions_for_missing_entries=False) if where else None
        except OSError:  # transformers' "does not appear to have a file named ..."
            return None

    def _subword_vocab(self) -> list[str]:
        if self.subword_vocab is None:
            where = self.config.name_or_path
            path = self._file(SUBWORD_VOCAB_FILE)
            if path is None:
                raise ValueError(f"{where or 'this model'} has no {SUBWORD_VOCAB_FILE}: the export could not read the "
                                 "run's subword vocabulary; set model.subword_vocab to the list of tokens by id")
            self.subword_vocab = _read_json(path)
        return self.subword_vocab


class CanineFillMaskPipeline(Pipeline):
    """transformers' "fill-mask" task for this export (config.json `custom_pipelines`):

        fill = pipeline("fill-mask", model=PATH, trust_remote_code=True)
        fill(f"The capital of France is P{fill.tokenizer.mask_token * 4}.", top_k=3)

    Text in, with the tokenizer's mask character (U+E003) at each masked character; out, as
    transformers' FillMaskPipeline gives it, per prediction the top_k {"score", "token",
    "token_str", "sequence"}, best first (a list of such lists when the text has several). CANINE-C
    predicts every masked character, left to right, each seeing the best answers before it;
    `token` is the codepoint, `score` the probability of its hash bucket, and a bucket is answered
    with the training data's most frequent character of it (or the best of `alphabet=`, a
    string). CANINE-S predicts one subword per run of masks. `sequence` is the text with this
    answer in place and the other masks filled with their best answers. `targets=` (a str or a
    list) limits the answers to those characters (CANINE-C) or subwords (CANINE-S), each scored,
    top_k at most their number, as in transformers' FillMaskPipeline; one that is not a single
    character or a subword of the vocabulary is refused (FillMaskPipeline would answer with its
    first token instead). Any other parameter is refused, not ignored."""

    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True

    def _sanitize_parameters(self, top_k=None, alphabet=None, targets=None, **unknown):
        if unknown:
            raise TypeError(f"fill-mask: no parameter {', '.join(sorted(unknown))} in this pipeline; it takes "
                            "top_k, targets and alphabet")
        forward = {}
        if top_k is not None:
            forward["top_k"] = int(top_k)
        if alphabet is not None:
            forward["alphabet"] = alphabet
        if targets is not None:
            self.model.target_ids(targets)  # refused now, before any text is read
            forward["targets"] = targets
        return {}, forward, {}

    def preprocess(self, inputs):
        if not isinstance(inputs, str):
            raise TypeError(f"fill-mask takes text (a str), got {type(inputs).__name__}")
        mask = self.tokenizer.mask_token
        if mask not in inputs:
            raise ValueError(f"No mask_token ({mask!r}, U+{ord(mask):04X}: tokenizer.mask_token) found on the input")
        return {"input_ids": torch.tensor([[CLS, *map(ord, inputs), SEP]]), "text": inputs}

    def _forward(self, model_inputs, top_k: int = 5, alphabet: str | None = None, targets=None):
        positions, answers = self.model.candidates(model_inputs["input_ids"][0], top_k, alphabet, targets)
        return {"text": model_inputs["text"], "positions": positions, "answers": answers}

    def postprocess(self, model_outputs):
        text, answers = model_outputs["text"], model_outputs["answers"]
        mask = self.tokenizer.mask_token
        # The text's characters and, for each prediction, which of them it replaces (one
        # character for CANINE-C, a run of masks for CANINE-S). Position p of the input is text[p - 1].
        spans = []
        for p in model_outputs["positions"]:
            lo = hi = p - 1
            while hi < len(text) and text[hi] == mask and (hi == lo or self.model.objective == "subword"):
                hi += 1
            spans.append((lo, hi))

        def written(answer: str) -> str:
            return answer[2:] if self.model.objective == "subword" and answer.startswith("##") else answer

        best = [written(a[0][0]) for a in answers]
        result = []
        for i, candidates in enumerate(answers):
            row = []
            for answer, score, token in candidates:
                fills = best[:i] + [written(answer)] + best[i + 1:]
                pieces, at = [], 0
                for (lo, hi), fill in zip(spans, fills):
                    pieces += [text[at:lo], fill]
                    at = hi
                pieces.append(text[at:])
                row.append({"score": score, "token": token, "token_str": answer, "sequence": "".join(pieces)})
            result.append(row)
        return result[0] if len(result) == 1 else result
