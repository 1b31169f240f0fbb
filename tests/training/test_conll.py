"""training/conll.py: reading CoNLL NER files (every error with its PATH:LINE), IOB1 -> IOB2, the
character labels, the windows, the max-context read-back and conlleval's input written back."""

import io

import fsspec
import numpy as np
import pytest

from contract.schema import CLS, SEP
from training import conll
from training.conll import IGNORE, ConllError, Sentence

# CoNLL 2003's layout: DOCSTART, four columns (token POS chunk NER), IOB1 (I-ORG starts an entity).
CONLL03 = """-DOCSTART- -X- -X- O

EU NNP B-NP I-ORG
rejects VBZ B-VP O
German JJ B-NP I-MISC
call NN I-NP O

Peter NNP B-NP I-PER
Blackburn NNP I-NP I-PER
"""

# MasakhaNER's layout: two columns, IOB2.
MASAKHANER = """Wizara B-ORG
ya I-ORG
Afya I-ORG
imesema O

Juma B-PER
"""


def write(tmp_path, name, text, encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding) if isinstance(text, str) else text)
    return str(path)


LABELS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
L2I = {label: i for i, label in enumerate(LABELS)}


def sentence(words, tags, where="f:1"):
    return Sentence(tuple(words), tuple(tags), "xx", where)


# --- parse_file_arg ------------------------------------------------------------------------

def test_parse_file_arg(tmp_path, monkeypatch):
    assert conll.parse_file_arg("swa=data/x.txt") == ("swa", "data/x.txt")
    assert conll.parse_file_arg("en-US_2=s3://b/k=v/x.txt") == ("en-US_2", "s3://b/k=v/x.txt")
    assert conll.parse_file_arg("data/swa/train.txt") == ("swa", "data/swa/train.txt")  # MasakhaNER's layout
    assert conll.parse_file_arg("s3://bucket/yor/dev.txt") == ("yor", "s3://bucket/yor/dev.txt")
    # An "=" whose left side is not a LANG is part of the path.
    assert conll.parse_file_arg("data/a=b/train.txt") == ("a=b", "data/a=b/train.txt")
    assert conll.parse_file_arg("s3://b/k=v/train.txt") == ("k=v", "s3://b/k=v/train.txt")
    (tmp_path / "hau").mkdir()
    monkeypatch.chdir(tmp_path / "hau")
    assert conll.parse_file_arg("test.txt") == ("hau", "test.txt")
    with pytest.raises(ValueError, match="LANG=/test.txt"):
        conll.parse_file_arg("/test.txt")


# --- read_conll ------------------------------------------------------------------------------

def test_reads_conll03_layout(tmp_path):
    path = write(tmp_path, "eng.txt", CONLL03)
    got = conll.read_conll(path, "en")
    assert got == [
        Sentence(("EU", "rejects", "German", "call"), ("I-ORG", "O", "I-MISC", "O"), "en", f"{path}:3"),
        Sentence(("Peter", "Blackburn"), ("I-PER", "I-PER"), "en", f"{path}:8"),
    ]


def test_reads_masakhaner_layout_and_fsspec_urls():
    with fsspec.open("memory://conll/swa/train.txt", "w") as f:
        f.write(MASAKHANER)
    got = conll.read_conll("memory://conll/swa/train.txt", "swa")
    assert [s.words for s in got] == [("Wizara", "ya", "Afya", "imesema"), ("Juma",)]
    assert [s.tags for s in got] == [("B-ORG", "I-ORG", "I-ORG", "O"), ("B-PER",)]
    assert [s.where for s in got] == ["memory://conll/swa/train.txt:1", "memory://conll/swa/train.txt:6"]


def test_separators_blank_lines_bom_crlf_and_docstart(tmp_path):
    text = ("\ufeffA\tNNP  B-PER \r\n"  # a BOM, a tab, two spaces, trailing space, CRLF
            "b O\r\n"
            " \t \r\n"  # whitespace only: a sentence ends
            "\n\n"
            "-DOCSTART- O\n"  # ends a sentence too, and is no word
            "c B-LOC\n"
            "-DOCSTART-\n"
            "d I-LOC")  # no final newline
    path = write(tmp_path, "x.txt", text)
    got = conll.read_conll(path, "xx")
    assert [(s.words, s.tags, s.where) for s in got] == [
        (("A", "b"), ("B-PER", "O"), f"{path}:1"),
        (("c",), ("B-LOC",), f"{path}:7"),
        (("d",), ("I-LOC",), f"{path}:9"),
    ]


def test_a_no_break_space_is_part_of_a_token(tmp_path):
    path = write(tmp_path, "x.txt", "10\u00a0000 O\n")  # only spaces and tabs separate fields
    assert conll.read_conll(path, "xx")[0].words == ("10\u00a0000",)


def test_a_line_without_a_tag(tmp_path):
    path = write(tmp_path, "x.txt", "a O\nlonely\n")
    with pytest.raises(ConllError, match=rf"^{path}:2: a line without a tag: 'lonely'$"):
        conll.read_conll(path, "xx")


@pytest.mark.parametrize("tag", ["E-PER", "S-LOC", "U-ORG", "L-MISC", "PER", "B-", "I-", "b-PER", "o"])
def test_unknown_tag_schemes_are_refused(tmp_path, tag):
    path = write(tmp_path, "x.txt", f"a O\n\nb B-PER\nc {tag}\n")
    with pytest.raises(ConllError) as e:
        conll.read_conll(path, "xx")
    message = str(e.value)
    assert message.startswith(f"{path}:4: unknown tag scheme {tag!r} in 'c {tag}': ")
    assert "tags must be BIO (IOB2) or IOB1: O, B-TYPE, I-TYPE" in message
    assert "BIOES" in message


def test_a_long_line_is_quoted_cut_to_80_characters(tmp_path):
    line = "x" * 100 + " BAD"
    path = write(tmp_path, "x.txt", line + "\n")
    with pytest.raises(ConllError) as e:
        conll.read_conll(path, "xx")
    assert f"in {'x' * 80 + '...'!r}:" in str(e.value)
    assert "x" * 81 not in str(e.value)


@pytest.mark.parametrize("text", ["", "\n\n", "-DOCSTART- -X- O O\n\n", "\ufeff"])
def test_no_sentences(tmp_path, text):
    path = write(tmp_path, "x.txt", text)
    with pytest.raises(ConllError, match=rf"^{path}: no sentences$"):
        conll.read_conll(path, "xx")


def test_bytes_that_are_not_utf8(tmp_path):
    path = write(tmp_path, "x.txt", "a O\nb O\nEspa\u00f1a B-LOC\n", encoding="latin-1")
    with pytest.raises(ConllError, match=rf"^{path}:3: not UTF-8 .*'Espa\ufffda B-LOC'"):
        conll.read_conll(path, "xx")


def test_a_missing_file(tmp_path):
    path = str(tmp_path / "nope.txt")
    with pytest.raises(FileNotFoundError, match=path):
        conll.read_conll(path, "xx")


# --- schemes and labels -------------------------------------------------------------------

def test_scheme_and_to_iob2():
    iob1 = ["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC", "I-PER", "B-PER"]
    assert conll.to_iob2(iob1) == ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "B-PER", "B-PER"]
    iob2 = ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC", "B-PER"]
    assert conll.to_iob2(iob2) == iob2
    assert conll.to_iob2([]) == []
    assert conll.scheme([sentence(["a", "b"], iob2[:2]), sentence(["c"], ["O"])]) == "IOB2"
    for tags in (["I-PER"], ["O", "I-PER"], ["B-LOC", "I-PER"], ["I-LOC", "I-PER"]):
        assert conll.scheme([sentence(["a"] * len(tags), tags)]) == "IOB1", tags
    # Each sentence starts afresh: an I- at a sentence start is IOB1 whatever the last sentence ended with.
    assert conll.scheme([sentence(["a"], ["B-PER"]), sentence(["b"], ["I-PER"])]) == "IOB1"


def test_label_list():
    sents = [sentence(["a", "b"], ["I-PER", "O"]), sentence(["c", "d"], ["B-LOC", "B-MISC"])]
    assert conll.label_list(sents) == ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-PER", "I-PER"]
    assert conll.label_list([sentence(["a"], ["O"])]) == ["O"]


def test_unseen_labels(tmp_path):
    train = conll.read_conll(write(tmp_path, "train.txt", "a B-PER\nb O\n"), "xx")
    dev_path = write(tmp_path, "dev.txt", "a B-PER\n\nb O\nc O\nd I-LOC\ne B-MISC\n\nf B-LOC\n")
    test_path = write(tmp_path, "test.txt", "g B-ORG\n")
    others = conll.read_conll(dev_path, "xx") + conll.read_conll(test_path, "xx")
    assert conll.unseen_labels(train, others) == {"LOC": f"{dev_path}:5", "MISC": f"{dev_path}:6",
                                                   "ORG": f"{test_path}:1"}
    assert conll.unseen_labels(train, train) == {}


# --- the character labels ---------------------------------------------------------------

def spans(labels, id2label):
    """Entities as a run B-X I-X ... over characters: what Hugging Face's "simple" aggregation
    groups (a B starts an entity, an I of the same type continues it, anything else ends it)."""
    found, current = [], None
    for i, label in enumerate(id2label[x] for x in labels):
        if current and label == "I-" + current[0]:
            current[2] = i + 1
            continue
        if current:
            found.append(tuple(current))
        current = [label[2:], i, i + 1] if label.startswith("B-") else None
    if current:
        found.append(tuple(current))
    return found


def test_sentence_text():
    assert conll.sentence_text(["Ann", "de", "Vos"]) == ("Ann de Vos", [0, 4, 7])
    assert conll.sentence_text(["x"]) == ("x", [0])


def test_char_labels_by_hand():
    words = ["Ann", "de", "Vos", "saw", "Rome", "Oslo"]
    tags = ["B-PER", "I-PER", "I-PER", "O", "B-LOC", "B-LOC"]
    text, _ = conll.sentence_text(words)
    # P/p: B-PER/I-PER, L/l: B-LOC/I-LOC, ".": O. The spaces inside "Ann de Vos" are I-PER; the space
    # between the adjacent entities Rome and Oslo is O, and Oslo starts again with B-LOC.
    assert text == "Ann de Vos saw Rome Oslo"
    expected = "Pppppppppp.....Llll.Llll"
    code = {"P": "B-PER", "p": "I-PER", "L": "B-LOC", "l": "I-LOC", ".": "O"}
    got = conll.char_labels(words, tags, L2I)
    assert got.dtype == np.int64
    assert [LABELS[x] for x in got] == [code[c] for c in expected]
    # Every run B I I ... is exactly an entity's character span.
    assert spans(got, LABELS) == [("PER", 0, 10), ("LOC", 15, 19), ("LOC", 20, 24)]
    assert text[0:10] == "Ann de Vos" and text[15:19] == "Rome" and text[20:24] == "Oslo"


def test_char_labels_of_iob1_tags_are_those_of_iob2():
    words, iob1 = ["Ann", "Vos", "in", "Rome", "Oslo"], ["I-PER", "I-PER", "O", "I-LOC", "B-LOC"]
    got = conll.char_labels(words, iob1, L2I)
    assert got.tolist() == conll.char_labels(words, conll.to_iob2(iob1), L2I).tolist()
    assert [LABELS[got[i]] for i in (0, 1, 3, 4, 11, 15, 16)] == ["B-PER", "I-PER", "I-PER", "I-PER", "B-LOC", "O",
                                                                   "B-LOC"]


def test_char_labels_of_a_type_not_in_the_list():
    with pytest.raises(ValueError, match="B-ORG"):
        conll.char_labels(["a"], ["B-ORG"], L2I)
    with pytest.raises(ValueError, match="I-PER"):
        conll.char_labels(["a"], ["B-PER"], {"O": 0, "B-PER": 1})


# --- windows ------------------------------------------------------------------------------

def codepoints(text):
    return [ord(c) for c in text]


def test_a_sentence_that_fits_is_one_window():
    s = sentence(["ab", "Cd"], ["O", "B-PER"])
    [w] = conll.windows([s], L2I, max_length=7, stride=0)
    assert (w.sentence, w.start) == (0, 0)
    assert w.input_ids.dtype == np.int32 and w.labels.dtype == np.int64
    assert w.input_ids.tolist() == [CLS, *codepoints("ab Cd"), SEP]
    assert w.labels.tolist() == [IGNORE, 0, 0, 0, L2I["B-PER"], L2I["I-PER"], IGNORE]


def starts(text_length, max_length, stride):
    s = sentence(["x" * text_length], ["O"])
    return [w.start for w in conll.windows([s], L2I, max_length, stride)]


def test_long_sentences_get_windows_at_stride_the_last_ending_at_the_end():
    assert starts(10, 6, 3) == [0, 3, 6]  # 6 + 4 = 10: the stride lands on the end
    assert starts(10, 6, 4) == [0, 4, 6]  # the last window moves back to end at 10
    assert starts(10, 6, 0) == [0, 2, 4, 6]  # stride 0: half of the capacity 4
    assert starts(10, 6, 1) == [0, 1, 2, 3, 4, 5, 6]
    assert starts(4, 6, 1) == [0]
    assert starts(5, 6, 4) == [0, 1]
    assert starts(9, 5, 0) == [0, 1, 2, 3, 4, 5, 6]  # capacity 3: half is 1


def test_windows_in_order_and_their_labels():
    sents = [sentence(["Ann", "de", "Vos", "saw", "Rome"], ["B-PER", "I-PER", "I-PER", "O", "B-LOC"]),
             sentence(["ok"], ["O"])]
    ws = conll.windows(sents, L2I, max_length=10, stride=5)
    text, _ = conll.sentence_text(sents[0].words)
    labels = conll.char_labels(sents[0].words, sents[0].tags, L2I)
    assert len(text) == 19  # capacity 8: windows at 0, 5, 10, and 11 to end at 19
    assert [(w.sentence, w.start) for w in ws] == [(0, 0), (0, 5), (0, 10), (0, 11), (1, 0)]
    for w in ws[:4]:
        assert w.input_ids.tolist() == [CLS, *codepoints(text[w.start:w.start + 8]), SEP]
        assert w.labels.tolist() == [IGNORE, *labels[w.start:w.start + 8].tolist(), IGNORE]


def test_a_word_longer_than_the_window():
    word = "Rheinland\U0001d538Pfalz"  # 15 characters, one outside the BMP: one position, as a codepoint
    [s] = [sentence(["in", word], ["O", "B-LOC"])]
    ws = conll.windows([s], L2I, max_length=8, stride=0)
    assert [w.start for w in ws] == [0, 3, 6, 9, 12]
    assert ws[1].input_ids.tolist() == [CLS, *codepoints(word[0:6]), SEP]
    assert ws[1].labels.tolist() == [IGNORE, L2I["B-LOC"]] + [L2I["I-LOC"]] * 5 + [IGNORE]
    assert ws[-1].input_ids[1:-1].tolist() == codepoints(("in " + word)[-6:])


@pytest.mark.parametrize("max_length,stride", [(6, 5), (6, -1), (2, 0), (1, 1)])
def test_bad_window_settings(max_length, stride):
    with pytest.raises(ValueError):
        conll.windows([sentence(["a"], ["O"])], L2I, max_length, stride)


# --- reading predictions back ---------------------------------------------------------------

def test_word_predictions_round_trip_of_the_gold_labels():
    sents = [sentence(["Ann", "de", "Vos", "saw", "Rome", "and", "Oslo"], ["I-PER", "I-PER", "I-PER", "O", "B-LOC", "O",
                                                                         "I-LOC"]),
             sentence(["Rheinland-Pfalz"], ["B-LOC"])]
    ws = conll.windows(sents, L2I, max_length=9, stride=3)
    assert len(ws) > 4
    got = conll.word_predictions(sents, ws, [w.labels for w in ws], LABELS)
    assert got == [conll.to_iob2(s.tags) for s in sents]
    # id2label may be a dict too; a padded prediction row is fine.
    padded = [np.concatenate([w.labels, [0, 0]]) for w in ws]
    assert conll.word_predictions(sents, ws, padded, dict(enumerate(LABELS))) == got


def test_word_predictions_take_the_window_of_most_context():
    # One-character words at offsets 0, 2, ..., 14; capacity 8, stride 4: windows at 0, 4 and 7.
    s = sentence(list("abcdefgh"), ["O"] * 8)
    ws = conll.windows([s], L2I, max_length=10, stride=4)
    assert [w.start for w in ws] == [0, 4, 7]
    # Each window predicts a label of its own everywhere, so the answer says which window was read.
    predictions = [np.full(len(w.input_ids), i) for i, w in enumerate(ws)]
    names = ["w0", "w1", "w2"]
    # offset 4: min(4, 3) = 3 in window 0 against min(0, 7) = 0 in window 1; offset 6: 1 against 2;
    # offset 8: min(4, 3) = 3 in window 1 against 1; offset 10: 1 against min(3, 4) = 3.
    assert conll.word_predictions([s], ws, predictions, names) == [["w0", "w0", "w0", "w1", "w1", "w2", "w2", "w2"]]


def test_word_predictions_ties_go_to_the_earlier_window():
    s = sentence(list("abc"), ["O"] * 3)  # "a b c": capacity 4, windows at 0 and 1
    ws = conll.windows([s], L2I, max_length=6, stride=4)
    assert [w.start for w in ws] == [0, 1]
    predictions = [np.full(6, 0), np.full(6, 1)]
    # offset 2 ("b"): min(2, 1) = 1 in window 0 and min(1, 2) = 1 in window 1: the earlier.
    assert conll.word_predictions([s], ws, predictions, ["w0", "w1"]) == [["w0", "w0", "w1"]]


def test_word_predictions_read_the_first_character_and_keep_an_i_at_a_start():
    s = sentence(["ab", "cd"], ["O", "O"])
    [w] = conll.windows([s], L2I, max_length=7, stride=0)
    row = np.array([IGNORE, L2I["I-PER"], L2I["B-LOC"], L2I["O"], L2I["O"], L2I["I-LOC"], IGNORE])
    assert conll.word_predictions([s], [w], [row], LABELS) == [["I-PER", "O"]]


def test_word_predictions_errors():
    s = sentence(["ab", "cd"], ["O", "O"], where="f.txt:3")
    [w] = conll.windows([s], L2I, max_length=7, stride=0)
    with pytest.raises(ValueError, match="1 predictions for 0 windows"):
        conll.word_predictions([s], [], [np.zeros(7)], LABELS)
    with pytest.raises(ValueError, match="f.txt:3: no window"):
        conll.word_predictions([s], [conll.Window(0, 0, w.input_ids[:3], w.labels[:3])], [np.zeros(3)], LABELS)
    with pytest.raises(ValueError, match=r"predictions\[0\] has 4 positions"):
        conll.word_predictions([s], [w], [np.zeros(4, dtype=int)], LABELS)


# --- conlleval's input ------------------------------------------------------------------

def test_write_predictions_round_trip(tmp_path):
    src = ("-DOCSTART- -X- -X- O\n"
           "\n"
           "EU NNP B-NP I-ORG\n"
           "rejects\tVBZ  B-VP O\n"
           "\n"
           " \t\n"
           "Peter NNP B-NP I-PER\n"
           "Blackburn NNP I-NP I-PER\n")
    path = write(tmp_path, "eng.txt", src)
    sents = conll.read_conll(path, "en")
    predicted = [["B-ORG", "B-MISC"], ["B-PER", "I-PER"]]
    out = io.StringIO()
    conll.write_predictions(path, sents, predicted, out)
    assert out.getvalue() == ("-DOCSTART- -X- -X- O O\n"
                              "\n"
                              "EU NNP B-NP I-ORG B-ORG\n"
                              "rejects VBZ B-VP O B-MISC\n"
                              "\n"
                              "\n"
                              "Peter NNP B-NP I-PER B-PER\n"
                              "Blackburn NNP I-NP I-PER I-PER\n")
    # Read back: the gold column is the file's, the last one ours.
    back = conll.read_conll(write(tmp_path, "out.txt", out.getvalue()), "en")
    assert [s.tags for s in back] == [tuple(p) for p in predicted]
    assert [s.words for s in back] == [s.words for s in sents]


def test_write_predictions_checks_the_sentences_are_the_file_s(tmp_path):
    path = write(tmp_path, "a.txt", "a O\nb O\n\nc O\n")
    sents = conll.read_conll(path, "xx")
    with pytest.raises(ValueError, match="2 predicted sentences for 1"):
        conll.write_predictions(path, sents[:1], [["O", "O"], ["O"]], io.StringIO())
    with pytest.raises(ValueError, match=f"{path}:1: 1 predicted tags for 2 words"):
        conll.write_predictions(path, sents, [["O"], ["O"]], io.StringIO())
    other = [sentence(["a", "x"], ["O", "O"]), sentence(["c"], ["O"])]
    with pytest.raises(ValueError, match=rf"{path}:2: the sentences are not this file's"):
        conll.write_predictions(path, other, [["O", "O"], ["O"]], io.StringIO())
