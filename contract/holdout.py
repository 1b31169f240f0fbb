"""How many of a language's kept pages the validation split holds out, and the
--validation-fraction that a hint suggests. Both sides read it: preprocessing splits by it
(pipeline/beam/split.py, the job and `canine validate`) and says what to change when a language got
no validation page; the trainer and `canine evaluate` say it when there is nothing to evaluate
on. A hint is computed from the manifest's own page counts, so the value it names leads to a
run that works on that input (a fixed "0.05" held out nothing of a 2-page language).
"""

import math

# A language of 30 pages beside one of millions must still get validation pages, or `canine
# evaluate` cannot say whether it was learned. A language with fewer kept pages than this cannot
# spare one, and its figures would be noise: it gets only its proportional share (usually none);
# from here on it gets at least one page.
MIN_PAGES_FOR_VALIDATION = 20
# A hint never suggests more than this: below one half, a language of one page keeps its page
# for training (its share, 0.49, rounds to none) and a language of two or more keeps at least one.
MOST_SUGGESTED = 0.49


def validation_pages(kept: int, fraction: float) -> int:
    """How many of a language's `kept` pages are held out: round(fraction x kept), at least one
    from MIN_PAGES_FOR_VALIDATION pages on, none when the fraction is 0. (Above pipeline/beam/split.py's
    EXACT_VALIDATION_PAGES the job holds out this count in expectation.)"""
    if fraction <= 0:
        return 0
    share = math.floor(fraction * kept + 0.5)  # half up: Python's round() makes 2.5 -> 2
    return max(share, 1) if kept >= MIN_PAGES_FOR_VALIDATION else share


def fraction_for(kept: dict[str, int], at_least: int = 1) -> float | None:
    """The smallest --validation-fraction, in hundredths, that holds out a page of every language
    in `kept` ({lang: kept pages}) that can spare one (two pages or more) and `at_least` pages in
    all, while every language keeps training pages; None when no fraction does (one-page
    languages only, or fewer pages than `at_least` allows)."""
    for hundredths in range(1, round(MOST_SUGGESTED * 100) + 1):
        f = hundredths / 100
        held = {lang: validation_pages(n, f) for lang, n in kept.items()}
        if all(held[lang] for lang, n in kept.items() if n >= 2) and sum(held.values()) >= max(at_least, 1):
            return f
    return None


def hint(kept: dict[str, int], at_least: int = 1) -> str:
    """What to preprocess with so that validation holds out a page of each language of `kept`
    (and `at_least` pages in all): the flag with its value, or why none works."""
    f = fraction_for(kept, at_least)
    alone = sorted(lang for lang, n in kept.items() if n < 2)
    cannot = (f"{', '.join(alone)} ha{'s' if len(alone) == 1 else 've'} a single kept page, which cannot be both "
              "trained on and held out") if alone else ""
    if f is None:
        if alone and len(alone) == len(kept):
            return f"{cannot}; preprocess more of {'its' if len(alone) == 1 else 'their'} text"
        pages = sum(kept.values())
        return (f"no --validation-fraction holds out {at_least} of these {pages} kept pages and keeps pages to "
                "train on; preprocess more input")
    what = "a page of each language" if at_least <= 1 else f"at least {at_least} pages"
    return f"canine preprocess --validation-fraction {f:g} holds out {what}" + (f"; {cannot}" if cannot else "")
