"""CoNLL NER files in, character-level labelled windows out, word tags back: `canine finetune ner`'s data.

    sentences = read_conll("data/swa/train.txt", "swa")
    labels = label_list(sentences); label2id = {l: i for i, l in enumerate(labels)}
    ws = windows(sentences, label2id, max_length=2048, stride=0)
    ... the model predicts one label id per position of every window ...
    tags = word_predictions(sentences, ws, predictions, labels)
    write_predictions("data/swa/test.txt", sentences, tags, out)   # then: conlleval < out

The paper fine-tunes CANINE for NER as character-level sequence labelling with BIO span labels and
scores it as conlleval does (the CANINE paper, §4: CoNLL 2002 es/nl, CoNLL 2003 en/de, MasakhaNER
1.0, data/<lang>/{train,dev,test}.txt in masakhane-io/masakhane-ner). The files label words; the
model labels characters. This module is the bridge, pure Python and numpy, so the whole data path
is tested without torch.

Files: one token per line, fields separated by spaces or tabs, the token first and the tag last
(POS and chunk columns between them are ignored); a blank line ends a sentence; -DOCSTART- lines
are skipped. Tags are IOB2 (every entity starts with B-) or IOB1 (the CoNLL 2003 originals: B- only
between two adjacent entities of one type). BIOES/BILOU files are refused rather than guessed at.
Every error names PATH:LINE, so a bad line of a 200k-line file is found at once.

The character scheme (char_labels), and why:
  * a word's first character carries the word's own IOB2 tag (B-X, I-X or O);
  * its other characters carry I-X when the word is in an entity of type X, else O;
  * the space before a word carries I-X when that word continues the previous word's entity (its
    tag is I-X of the same chunk), else O.
So every character has a label (the loss reads all of them: no position is ignored but CLS, SEP
and padding), and an entity is exactly one run B-X I-X ... I-X over its characters, spaces inside
it included. That is the layout Hugging Face's token-classification pipeline reads: its "simple"
aggregation over characters returns whole entities with their character offsets, so an exported
model (CanineForTokenClassification) tags raw text with no word splitter. Two adjacent entities of
one type stay two: the space between them is O and the second starts with B-. Words are read back
from their first character only (word_predictions), which is where the word's own tag sits.

Windows: a sentence's text, words joined by single spaces as the paper's input, goes to the model
whole if it fits in max_length - 2 characters ([CLS] and [SEP]), else in overlapping windows; a
word's prediction comes from the window where its first character has the most context, as BERT's
SQuAD "max context" does (google-research/bert run_squad.py, _check_is_max_context).
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass

import fsspec
import numpy as np

from contract.schema import CLS, SEP

IGNORE = -100  # label of a position the loss ignores (CLS, SEP, padding): torch's cross_entropy default

_LANG_ARG = re.compile(r"([A-Za-z0-9_-]+)=(.+)")
_TAG = re.compile(r"(O|[BI]-.+)")
_FIELD_SEPARATORS = re.compile(r"[ \t]+")
_DOCSTART = "-DOCSTART-"


class ConllError(ValueError):
    """A file that is not a CoNLL NER file; the message starts with "PATH:LINE: " where a line is at fault."""


@dataclass(frozen=True)
class Sentence:
    words: tuple[str, ...]
    tags: tuple[str, ...]  # as written in the file (IOB1 or IOB2)
    lang: str
    where: str  # "PATH:LINE" of its first word (PATH as given); its words are on consecutive lines


# eq=False: the fields are numpy arrays, whose == is elementwise; a window is compared by its fields in tests.
@dataclass(frozen=True, eq=False)
class Window:
    sentence: int  # index into the sentence list
    start: int  # offset in the sentence text of the window's first character
    input_ids: np.ndarray  # int32: [CLS] + codepoints of text[start:start+n] + [SEP]
    labels: np.ndarray  # int64, same length: IGNORE at CLS and SEP, char_labels otherwise


def parse_file_arg(arg: str) -> tuple[str, str]:
    """"LANG=PATH" -> (LANG, PATH); a plain PATH -> (its parent folder's name, PATH): MasakhaNER's
    data/<lang>/train.txt names its language. An "=" in a path whose part before it is not a LANG
    (letters, digits, - and _) belongs to the path: s3://b/k=v/train.txt is a path."""
    match = _LANG_ARG.fullmatch(arg)
    if match:
        return match.group(1), match.group(2)
    if "://" in arg:
        parent = posixpath.basename(posixpath.dirname(arg.split("://", 1)[1]))
    else:
        parent = os.path.basename(os.path.dirname(os.path.abspath(arg)))
    if not parent:
        raise ValueError(f"{arg}: no folder to name its language; write LANG={arg}")
    return parent, arg


def _quote(line: str) -> str:
    return repr(line[:80] + ("..." if len(line) > 80 else ""))


def _read_lines(path: str) -> list[bytes]:
    """The file's lines as bytes (decoded one at a time, so a bad byte is reported with its line)."""
    try:
        with fsspec.open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{path}: no such file") from e
    if data.startswith(b"\xef\xbb\xbf"):  # a UTF-8 BOM, as editors on Windows write
        data = data[3:]
    lines = data.split(b"\n")
    if lines[-1] == b"":  # the piece after a final newline is not a line
        lines.pop()
    return lines


def _decode(raw: bytes, path: str, number: int) -> str:
    try:
        return raw.decode("utf-8").rstrip("\r")
    except UnicodeDecodeError as e:
        shown = raw.decode("utf-8", errors="replace")
        raise ConllError(f"{path}:{number}: not UTF-8 ({e.reason} at byte {e.start} of the line; convert the "
                         f"file, e.g. iconv -f latin1 -t utf-8): {_quote(shown)}") from None


def _fields(line: str) -> list[str]:
    return [f for f in _FIELD_SEPARATORS.split(line) if f]


def _is_blank(line: str) -> bool:
    return not line.strip()


def read_conll(path: str, lang: str) -> list[Sentence]:
    """The sentences of one CoNLL NER file (a local path or any fsspec URL), in file order."""
    sentences: list[Sentence] = []
    words: list[str] = []
    tags: list[str] = []
    first = 0

    def close():
        if words:
            sentences.append(Sentence(tuple(words), tuple(tags), lang, f"{path}:{first}"))
            words.clear()
            tags.clear()

    for number, raw in enumerate(_read_lines(path), 1):
        line = _decode(raw, path, number)
        if _is_blank(line) or line.startswith(_DOCSTART):
            close()
            continue
        fields = _fields(line)
        if len(fields) < 2:
            raise ConllError(f"{path}:{number}: a line without a tag: {_quote(line)}")
        tag = fields[-1]
        if not _TAG.fullmatch(tag):
            raise ConllError(f"{path}:{number}: unknown tag scheme {tag!r} in {_quote(line)}: tags must be BIO "
                             "(IOB2) or IOB1: O, B-TYPE, I-TYPE (BIOES/BILOU tags, E- S- L- U-, are not read)")
        if not words:
            first = number
        words.append(fields[0])
        tags.append(tag)
    close()
    if not sentences:
        raise ConllError(f"{path}: no sentences")
    return sentences


def _type(tag: str) -> str:
    return tag[2:]  # "" for O


def _starts_chunk(previous: str, tag: str) -> bool:
    """conlleval's startOfChunk for B/I/O: B-X, or I-X after O or after another type."""
    return tag.startswith("B-") or (tag.startswith("I-") and (previous == "O" or _type(previous) != _type(tag)))


def scheme(sentences) -> str:
    """"IOB2" if every entity starts with B-, else "IOB1" (an I-X starts a chunk somewhere)."""
    for s in sentences:
        previous = "O"
        for tag in s.tags:
            if tag.startswith("I-") and _starts_chunk(previous, tag):
                return "IOB1"
            previous = tag
    return "IOB2"


def to_iob2(tags) -> list[str]:
    """IOB2 tags with conlleval's chunks: an I-X that starts a chunk becomes B-X. IOB2 stays as it is."""
    out = []
    previous = "O"
    for tag in tags:
        out.append("B-" + _type(tag) if tag.startswith("I-") and _starts_chunk(previous, tag) else tag)
        previous = tag
    return out


def _types(sentences) -> set[str]:
    return {_type(t) for s in sentences for t in s.tags if t != "O"}


def label_list(sentences) -> list[str]:
    """["O", "B-T1", "I-T1", ...]: both B and I of every entity type seen (in any scheme), types sorted."""
    return ["O"] + [f"{p}-{t}" for t in sorted(_types(sentences)) for p in ("B", "I")]


def unseen_labels(train, others) -> dict[str, str]:
    """Entity types of `others` (dev/test sentences) that train lacks -> "PATH:LINE" of their first occurrence."""
    known = _types(train)
    unseen: dict[str, str] = {}
    for s in others:
        path, first = s.where.rsplit(":", 1)
        for i, tag in enumerate(s.tags):
            t = _type(tag)
            if tag != "O" and t not in known and t not in unseen:
                unseen[t] = f"{path}:{int(first) + i}"  # a sentence's words are consecutive lines
    return unseen


def sentence_text(words) -> tuple[str, list[int]]:
    """The words joined by single spaces (the paper's input) and the offset of every word in it."""
    starts, at = [], 0
    for w in words:
        starts.append(at)
        at += len(w) + 1
    return " ".join(words), starts


def char_labels(words, iob2_tags, label2id: dict[str, int]) -> np.ndarray:
    """int64 label ids, one per character of sentence_text(words): the scheme of the module docstring.
    Tags are passed through to_iob2 first (a no-op on IOB2), so an I-X that starts a chunk is B-X."""
    tags = to_iob2(iob2_tags)
    text, starts = sentence_text(words)
    needed = {"O", *tags, *("I-" + _type(t) for t in tags if t != "O")}
    missing = sorted(needed - label2id.keys())
    if missing:
        raise ValueError(f"labels {missing} are not in the label list (types the training data lacks?)")
    out = np.empty(len(text), dtype=np.int64)
    for word, tag, at in zip(words, tags, starts):
        inside = "O" if tag == "O" else "I-" + _type(tag)
        if at:  # the space before the word: inside the entity only when the word continues it
            continues = tag.startswith("I-")  # after to_iob2 an I-X always continues the previous word's chunk
            out[at - 1] = label2id[inside if continues else "O"]
        out[at] = label2id[tag]
        out[at + 1:at + len(word)] = label2id[inside]
    return out


def _codepoints(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int32)


def _starts(n: int, capacity: int, stride: int) -> list[int]:
    """Window starts 0, stride, 2*stride, ... until a window reaches n; the last ends exactly at n."""
    starts, at = [], 0
    while at + capacity < n:
        starts.append(at)
        at += stride
    starts.append(max(0, n - capacity))
    return starts


def windows(sentences, label2id, max_length: int, stride: int) -> list[Window]:
    """Every sentence's text in windows of at most max_length - 2 characters, never truncated (the
    module docstring). stride 0 is half the capacity; otherwise 1..capacity."""
    capacity = max_length - 2
    if capacity < 1:
        raise ValueError(f"max_length {max_length} leaves no room for text beside [CLS] and [SEP]")
    if stride == 0:
        stride = max(1, capacity // 2)
    if not 1 <= stride <= capacity:
        raise ValueError(f"stride {stride} must be 0 (half the window) or 1..{capacity} (max_length - 2), "
                         "else characters between windows would be skipped")
    out = []
    for k, s in enumerate(sentences):
        text, _ = sentence_text(s.words)
        ids = _codepoints(text)
        labels = char_labels(s.words, s.tags, label2id)
        for start in _starts(len(text), capacity, stride):
            end = start + capacity
            out.append(Window(
                sentence=k, start=start,
                input_ids=np.concatenate([[CLS], ids[start:end], [SEP]]).astype(np.int32),
                labels=np.concatenate([[IGNORE], labels[start:end], [IGNORE]]).astype(np.int64)))
    return out


def word_predictions(sentences, windows, predictions, id2label) -> list[list[str]]:
    """Every sentence's predicted word tags: the label predicted at each word's first character, in
    the window where that character has the most context, min(characters left of it in the window,
    characters right of it); ties go to the earlier window. predictions[i] is aligned with
    windows[i].input_ids (index 0 is CLS; longer, padded rows are fine). id2label: a list or a dict.
    An I-X at a word start is returned as is: conlleval reads it as a chunk's start."""
    if len(predictions) != len(windows):
        raise ValueError(f"{len(predictions)} predictions for {len(windows)} windows")
    by_sentence: dict[int, list[int]] = {}
    for i, w in enumerate(windows):
        by_sentence.setdefault(w.sentence, []).append(i)
    out = []
    for k, s in enumerate(sentences):
        _, starts = sentence_text(s.words)
        tags = []
        for word, at in zip(s.words, starts):
            best, best_context = None, -1
            for i in by_sentence.get(k, ()):
                w = windows[i]
                n = len(w.input_ids) - 2
                p = at - w.start
                if 0 <= p < n and min(p, n - 1 - p) > best_context:  # strict: a tie keeps the earlier window
                    best, best_context = (i, p), min(p, n - 1 - p)
            if best is None:
                raise ValueError(f"{s.where}: no window holds the first character of word {word!r}")
            i, p = best
            row = predictions[i]
            if len(row) < len(windows[i].input_ids):
                raise ValueError(f"predictions[{i}] has {len(row)} positions, its window {len(windows[i].input_ids)}")
            tags.append(id2label[int(row[1 + p])])
        out.append(tags)
    return out


def write_predictions(src_path: str, sentences, predicted: list[list[str]], out) -> None:
    """src_path with every token line's predicted tag appended as one more column: conlleval's input
    (token ... gold predicted). `sentences` are read_conll(src_path)'s, in order.

    Lines are written as they are, with two changes conlleval needs (it splits fields on single
    spaces and requires the same number on every non-blank line): fields are rejoined by single
    spaces (a no-op on CoNLL and MasakhaNER files, tabs or runs of spaces are not), and a -DOCSTART-
    line gets "O" too, because conlleval knows only "-X-" as a boundary and reads a DOCSTART line
    as a token: predicted O, gold O, it counts in its token accuracy but never in entity figures.
    A whitespace-only line is written empty (conlleval would read a tab as a one-field line)."""
    if len(predicted) != len(sentences):
        raise ValueError(f"{len(predicted)} predicted sentences for {len(sentences)} sentences of {src_path}")
    for s, tags in zip(sentences, predicted):
        if len(tags) != len(s.words):
            raise ValueError(f"{s.where}: {len(tags)} predicted tags for {len(s.words)} words")
    flat = ((w, t) for s, tags in zip(sentences, predicted) for w, t in zip(s.words, tags))
    for number, raw in enumerate(_read_lines(src_path), 1):
        line = _decode(raw, src_path, number)
        if _is_blank(line):
            out.write("\n")
            continue
        fields = _fields(line)
        if line.startswith(_DOCSTART):
            out.write(" ".join(fields + ["O"]) + "\n")
            continue
        word, tag = next(flat, (None, None))
        if word != fields[0]:
            raise ValueError(f"{src_path}:{number}: the sentences are not this file's (token {fields[0]!r}, "
                             f"expected {word!r})")
        out.write(" ".join(fields + [tag]) + "\n")
    if next(flat, None) is not None:
        raise ValueError(f"{src_path}: the sentences have more words than the file")
