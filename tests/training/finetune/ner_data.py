"""Small CoNLL files written for the tests (no corpus's text: MasakhaNER is CC BY-NC): sentences
from templates in two languages, person, location and organisation names, IOB2 in one language
and IOB1 in the other, a -DOCSTART- line and POS columns as CoNLL 2003 has them, and one sentence
longer than the tests' window, so every reading rule and the windows are exercised."""

import random

PEOPLE = ["Amina Juma", "Baraka Mwangi", "Neema", "John Okello", "Fatuma Ali Hassan", "Musa", "Grace Wanjiru",
          "Peter Otieno", "Halima", "Joseph Kamau"]
PLACES = ["Dodoma", "Arusha", "Mombasa", "Dar es Salaam", "Kisumu", "Zanzibar", "Nairobi", "Tanga"]
ORGS = ["Benki Kuu", "Umoja wa Mataifa", "Shirika la Reli", "Chuo Kikuu cha Dodoma", "Bunge"]
TEMPLATES = {
    "swa": ["{PER} alikwenda {LOC} jana .", "Rais {PER} alizuru {LOC} wiki iliyopita .",
            "{ORG} ilifungua ofisi mpya huko {LOC} .", "Wafanyakazi wa {ORG} walikutana na {PER} mjini {LOC} .",
            "Mvua kubwa ilinyesha usiku wote .", "{PER} na {PER} walisafiri kutoka {LOC} hadi {LOC} ."],
    "eng": ["{PER} travelled to {LOC} yesterday .", "President {PER} visited {LOC} last week .",
            "{ORG} opened a new office in {LOC} .", "Staff of {ORG} met {PER} in {LOC} .",
            "Heavy rain fell all night .", "{PER} and {PER} drove from {LOC} to {LOC} ."],
}
KIND = {"PER": PEOPLE, "LOC": PLACES, "ORG": ORGS}


def sentence(rng, template: str) -> list[tuple[str, str]]:
    """[(word, IOB2 tag)] of one template filled with names."""
    out = []
    for part in template.split():
        if part.startswith("{"):
            kind = part[1:-1]
            for i, word in enumerate(rng.choice(KIND[kind]).split()):
                out.append((word, f"{'B' if i == 0 else 'I'}-{kind}"))
        else:
            out.append((part, "O"))
    return out


def iob1(tags: list[str]) -> list[str]:
    """IOB2 -> IOB1 (CoNLL 2003's original): B- only where an entity follows one of its type."""
    out = []
    for i, tag in enumerate(tags):
        if tag.startswith("B-") and not (i and tags[i - 1] != "O" and tags[i - 1][2:] == tag[2:]):
            tag = "I-" + tag[2:]
        out.append(tag)
    return out


def write(path, lang: str, n: int, seed: int, scheme: str = "IOB2", long_sentence: bool = False) -> str:
    """A CoNLL file of `n` sentences (token POS tag columns), returns its path."""
    rng = random.Random(seed)
    lines = ["-DOCSTART- -X- O", ""]
    sentences = [sentence(rng, rng.choice(TEMPLATES[lang])) for _ in range(n)]
    if long_sentence:  # longer than the tests' 128-character window: read in overlapping windows
        sentences.append([w for t in TEMPLATES[lang][:4] for w in sentence(rng, t)])
    for words in sentences:
        tags = [t for _, t in words]
        tags = iob1(tags) if scheme == "IOB1" else tags
        lines += [f"{w} X {t}" for (w, _), t in zip(words, tags)] + [""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return str(path)


def write_task(root) -> dict[str, list[str]]:
    """train/dev/test files of two languages under root/{swa,eng}/ (their folders name them)."""
    files = {"train": [], "dev": [], "test": []}
    for k, lang in enumerate(("swa", "eng")):
        (root / lang).mkdir(parents=True, exist_ok=True)
        scheme = "IOB2" if lang == "swa" else "IOB1"
        for role, n, seed in (("train", 120, 1), ("dev", 24, 2), ("test", 24, 3)):
            files[role].append(write(root / lang / f"{role}.txt", lang, n, seed + 10 * k, scheme,
                                     long_sentence=role != "train"))
    return files
