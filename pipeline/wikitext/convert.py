"""A whole page in one variant: the text MediaWiki shows a reader who picked one (zh-hans:
simplified characters throughout), off by default (`PreprocessConfig.convert`, docs/text.md).

By default a page keeps the text its editors wrote; zhwiki's pages mix simplified and traditional
characters, since MediaWiki converts them for each reader (LanguageConverter::autoConvert with the
language's tables). `convert` does that conversion after cleaning, for the languages whose
converter is a table MediaWiki ships and we can apply faithfully:
- zh, gan, wuu: MediaWiki's ZhConversion tables (gan-hans and wuu-hans use zh-hans's, as
  GanConverter and WuuConverter do), through the zhconv-rs package (the `variants` extra): its
  tables are that file, applied leftmost-longest like MediaWiki's ReplacementArray (strtr).
- sr (sr-ec, sr-el) and sh (sh-cyrl): the letter-for-letter transliteration of SrConverter and
  ShConverter, written here; Roman numerals stay Latin, and a page (or a stretch between
  protected spans) already mostly in the target script is left alone (SrConverter::guessVariant).
Other wikis with variants (kk, ku, uz, tg, crh, iu, shi, ban, mni, tly, zgh) have converters of
rules and exceptions, not tables: not offered.

What stays as written, as on the wiki: the text a `-{...}-` construct shows (variants.py wraps it
in PROTECT_OPEN / PROTECT_CLOSE when a conversion follows), formulas and inline code (still marks
when the conversion runs), and the whole page when it holds __NOCONTENTCONVERT__ / __NOCC__.
A page's `-{A|...}-` and `-{H|...}-` rules join the table for that page.
"""

import os
import re
from functools import lru_cache

import numpy as np

from contract.extras import install_hint
from pipeline.wikitext.variants import CONVERTERS, PROTECT_CLOSE, PROTECT_OPEN

EXTRA = "variants"  # pyproject.toml's extra that installs zhconv-rs

# The variants a page of each language can be converted to. zh-cn/sg/my use the zh-hans table plus
# mainland phrases, zh-tw/hk/mo zh-hant's plus their own (ZhConverter::loadDefaultTables).
TARGETS = {
    "zh": ("zh-hans", "zh-hant", "zh-cn", "zh-tw", "zh-hk", "zh-mo", "zh-sg", "zh-my"),
    "gan": ("gan-hans", "gan-hant"),
    "wuu": ("wuu-hans", "wuu-hant"),
    "sr": ("sr-ec", "sr-el"),
    "sh": ("sh-cyrl",),
}
_ZH_TABLE = {"gan-hans": "zh-hans", "gan-hant": "zh-hant", "wuu-hans": "zh-hans", "wuu-hant": "zh-hant"}

# Serbian Cyrillic and Latin, letter for letter (SrConverter, ShConverter); the digraphs lj, nj, dž
# are one Cyrillic letter each.
_CYRL = "абвгдђежзијклљмнњопрстћуфхцчџш"
_LATN = "a b v g d đ e ž z i j k l lj m n nj o p r s t ć u f h c č dž š".split()
_TO_LATN = {**dict(zip(_CYRL, _LATN)), **{c.upper(): l.capitalize() for c, l in zip(_CYRL, _LATN)}}
_TO_CYRL_SH = {**{l: c for c, l in zip(_CYRL, _LATN)}, **{l.capitalize(): c.upper() for c, l in zip(_CYRL, _LATN)},
               "DŽ": "Џ", "LJ": "Љ"}
# SrConverter also has NJ (ShConverter's entry has a Cyrillic Ј by mistake), and `!` to keep two
# letters apart: `d!ž` is дж, not џ.
_TO_CYRL_SR = {**_TO_CYRL_SH, "NJ": "Њ", "d!ž": "дж", "D!ž": "Дж", "D!Ž": "ДЖ", "l!j": "лј", "L!j": "Лј",
               "L!J": "ЛЈ", "n!j": "нј", "N!j": "Нј", "N!J": "НЈ"}
# LanguageConverterSpecific::translateWithoutRomanNumbers: an upper-case Roman numeral between
# ASCII non-word characters (or the ends) stays as written: `XIV век` is not `ХИВ век`.
_BREAK = r"[^\w\x80-\U0010ffff]"
_ROMAN = r"(?=[MDCLXVI])M{0,4}(?:C[DM]|D?C{0,3})(?:X[LC]|L?X{0,3})(?:I[VX]|V?I{0,3})"
_ROMAN_RE = re.compile(rf"^{_ROMAN}$|^{_ROMAN}{_BREAK}|{_BREAK}{_ROMAN}$|{_BREAK}{_ROMAN}{_BREAK}", re.ASCII)
# SrConverter::guessVariant: the letters only one script has.
_ONLY_CYRL_RE, _ONLY_LATN_RE = re.compile("[шђчћжШЂЧЋЖ]"), re.compile("[šđčćžŠĐČĆŽ]")

_PROTECTED_RE = re.compile(f"{PROTECT_OPEN}([^{PROTECT_OPEN}{PROTECT_CLOSE}]*){PROTECT_CLOSE}|[{PROTECT_OPEN}{PROTECT_CLOSE}]")
NO_CONVERT_RE = re.compile(r"__(?:NOCONTENTCONVERT|NOCC)__", re.I)  # MagicWord 'nocontentconvert'


def check_convert(pairs) -> dict:
    """`("zh=zh-hans", ...)` -> {"zh": "zh-hans"}; a ValueError names every item that is not an
    offered conversion, and the choices."""
    chosen, bad = {}, []
    for pair in pairs:
        lang, _, variant = str(pair).partition("=")
        lang = lang.strip().lower()
        conv = CONVERTERS.get(lang)
        code = conv.validate(variant.strip()) if conv else None  # zh-Hans, sr-Latn as MediaWiki reads them
        if code in TARGETS.get(lang, ()):
            chosen[lang] = code
        else:
            bad.append(str(pair))
    if bad:
        offered = "; ".join(f"{lang}: {' '.join(targets)}" for lang, targets in TARGETS.items())
        raise ValueError(f"cannot convert to {', '.join(bad)} (offered: {offered})")
    return chosen


def require(chosen: dict) -> None:
    """A ValueError naming the extra to install when a chosen conversion needs zhconv-rs and it is
    missing: said before any work, not by every page."""
    needs = [f"{lang}={v}" for lang, v in chosen.items() if lang not in ("sr", "sh")]
    if needs:
        try:
            import zhconv_rs  # noqa: F401
        except ImportError:
            raise ValueError(f"--convert {', '.join(needs)}: needs the zhconv-rs package; "
                             f"{install_hint(EXTRA)}") from None


def convert_page(text: str, lang: str, variant: str, rules: dict | None = None) -> tuple[str, int]:
    """`text` in `variant`, protection marks removed, and the number of its characters the
    conversion changed. `rules`: the page's manual rules for `variant` ({from: to}, variants.render)."""
    if _written_in(text, variant):  # recursiveConvertTopLevel's guess on the whole page
        return _PROTECTED_RE.sub(r"\1", text), 0
    translate = _translator(lang, variant, tuple((rules or {}).items()))
    out, changed, pos = [], 0, 0
    for m in _PROTECTED_RE.finditer(text):
        piece, n = translate(text[pos:m.start()])
        out += [piece, m.group(1) or ""]
        changed, pos = changed + n, m.end()
    piece, n = translate(text[pos:])
    out.append(piece)
    return "".join(out), changed + n


def convert_titles(titles: list, text: str, lang: str, variant: str, rules: dict | None = None) -> list[str]:
    """Headings recorded of a page (those dropped as end matter, the last kept) in `variant`, as
    convert_page converts the page's `text`: left as written, marks removed, where its whole-page
    guess leaves the page so."""
    if _written_in(text, variant):
        return [_PROTECTED_RE.sub(r"\1", title) for title in titles]
    return [convert_page(title, lang, variant, rules)[0] for title in titles]


@lru_cache(maxsize=64)
def _translator(lang: str, variant: str, rules: tuple):
    """str -> (str in `variant`, characters changed). Cached: a page's rules make a table of its
    own (zhconv-rs builds one in about 5 ms), the other pages share one."""
    if lang in ("sr", "sh"):
        table = {"sr-el": _TO_LATN, "sr-ec": _TO_CYRL_SR, "sh-cyrl": _TO_CYRL_SH}[variant]
        table = {**table, **dict(rules)}
        return lambda piece: _transliterate(piece, table, variant)
    import zhconv_rs

    convert = zhconv_rs.make_converter(_ZH_TABLE.get(variant, variant), list(rules)) if rules else None
    base = _ZH_TABLE.get(variant, variant)

    def translate(piece: str) -> tuple[str, int]:
        if not piece:
            return piece, 0
        out = convert(piece) if convert else zhconv_rs.zhconv(piece, base)
        return out, _changed(piece, out)
    return translate


def _transliterate(piece: str, table: dict, variant: str) -> tuple[str, int]:
    if not piece.strip() or _written_in(piece, variant):  # LanguageConverter::translate, autoConvert
        return piece, 0
    pattern = _pattern(tuple(table))
    changed = 0

    def one(m):
        nonlocal changed
        to = table[m.group()]
        changed += len(m.group()) if to != m.group() else 0
        return to

    out, pos = [], 0
    for m in _ROMAN_RE.finditer(piece):  # numerals kept, the text around them converted
        out += [pattern.sub(one, piece[pos:m.start()]), m.group()]
        pos = m.end()
    out.append(pattern.sub(one, piece[pos:]))
    return "".join(out), changed


@lru_cache(maxsize=8)
def _pattern(keys: tuple) -> re.Pattern:
    # strtr: at each position the longest key that matches
    return re.compile("|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True)))


def _written_in(text: str, variant: str) -> bool:
    """SrConverter::guessVariant: more letters only the target script has than only the other has."""
    if variant not in ("sr-ec", "sr-el"):
        return False  # ShConverter and ZhConverter never guess
    cyrl, latn = len(_ONLY_CYRL_RE.findall(text)), len(_ONLY_LATN_RE.findall(text))
    return cyrl > latn if variant == "sr-ec" else latn > cyrl


def _changed(before: str, after: str) -> int:
    """Characters of `before` that the conversion changed (one array comparison; the tables map
    characters and phrases to as many characters)."""
    if before == after:
        return 0
    if len(before) != len(after):  # a phrase of another length: count what lies between the common ends
        head = len(os.path.commonprefix([before, after]))
        tail = len(os.path.commonprefix([before[head:][::-1], after[head:][::-1]]))
        return len(before) - head - tail
    a, b = (np.frombuffer(s.encode("utf-32-le"), dtype=np.uint32) for s in (before, after))
    return int(np.count_nonzero(a != b))

