"""MediaWiki's language-variant markup `-{...}-` -> the text one variant of the page shows.

Wikis whose language has a LanguageConverter (zh, sr, kk, ku, uz, tg, gan, wuu, shi, iu, crh,
ban, mni, sh, tly, zgh) mark words per script or region: `生物和-{zh-hans:信息; zh-hant:資訊;}-領域`,
`-{R|raw}-`, `-{H|rule}-`. MediaWiki renders them after parsing (LanguageConverter::
recursiveConvertTopLevel); we render them as a text pass on the wikitext before
mwparserfromhell, which does not know the syntax (a `|` in a rule inside a template's
parameter would split the parameter). Links and templates inside a rule stay wikitext and
render as they do elsewhere.

The view: by default the wiki's own no-conversion view (the variant MediaWiki serves a reader
with no preference: the main code, `sh-latn` for sh; LanguageConverter::$languagesWithStaticDefaultVariant);
`PreprocessConfig.variants` picks another, e.g. `zh=zh-hans`. Only the markup is rendered: the
text around it is not converted to the variant's script (lossy: 發/髮 -> 发), and neither is
`-{zh-hans;zh-hant|text}-`, whose text MediaWiki would convert (we keep it as written). Manual
rules (`-{A|...}-`, `-{H|...}-`) are not applied to the rest of the page: in the main view they
would not be (ConverterRule::generateConvTable, manual level 'disable' for zh, gan, wuu).

A whole-page conversion (`PreprocessConfig.convert`, pipeline/wikitext/convert.py) renders the
markup in its variant with a `table`: what each construct shows is wrapped in PROTECT_OPEN /
PROTECT_CLOSE, so that the conversion leaves it as written, as MediaWiki's does; the text of
`-{zh-hans;zh-hant|text}-` is left unwrapped, to be converted; and the page's manual rules for
the variant are collected in the table.

Semantics follow MediaWiki's includes/language/ConverterRule.php (parseFlags, parseRules,
getRuleConvertedStr, parse) and the converters in includes/language/converters/*Converter.php
(variants, fallbacks, manual levels, variant names). Where we differ, on purpose:
- An unclosed `-{` is dropped alone (MediaWiki shows it); it never takes text with it, and a
  construct ends at a blank line or a heading line, so a stray `-{` cannot pair with a `}-`
  paragraphs later (MediaWiki would hide everything in between).
- A rule MediaWiki cannot display shows its error message there; we render nothing.
- `-{...}-` inside <nowiki> stays text (MediaWiki escapes it there, CoreTagHooks::nowiki).
"""

import re
from dataclasses import dataclass, field

MAX_DEPTH = 10  # LanguageConverter::$mMaxDepth: deeper `-{` stays text

# `-{`, `}-`, and where an unclosed construct ends: a blank line or a heading line.
_TOKEN_RE = re.compile(r"-\{|\}-|\n[ \t]*\n|\n(?==)")
_NOWIKI_RE = re.compile(r"(<nowiki\s*>.*?</nowiki\s*>)", re.S | re.I)
# ConverterRule::parseRules: a `;` that ends an entity is not a separator.
_ENTITY_SEMI_RE = re.compile(r"(&[#a-zA-Z0-9]+);")
# The first `|` outside links and templates separates the flags (MediaWiki sees HTML there, where
# a link's `|` is gone).
_PIPE_SCAN_RE = re.compile(r"\[\[|\]\]|\{\{|\}\}|\|")
_FLAGS = {"A": "A", "T": "T", "R": "R", "D": "D", "-": "-", "H": "H", "N": "N"}  # LanguageConverter::getFlags
# Around what a construct shows when a whole-page conversion follows (convert.py): text MediaWiki
# does not convert. Not on a heading line, where the end-matter rule reads the title (the
# heading's text is converted whole). XML 1.0 forbids both characters, so no page holds them.
PROTECT_OPEN, PROTECT_CLOSE = "\x0e", "\x0f"


@dataclass(frozen=True)
class Converter:
    """One language's converter, as its includes/language/converters/*Converter.php declares it."""

    main: str  # getMainCode()
    variants: tuple  # getLanguageVariants()
    fallbacks: dict  # getVariantsFallbacks(): variant -> tuple of variants in order
    default: str = ""  # the static default variant (the no-conversion view); "" = main
    disabled: frozenset = frozenset()  # variants whose manual level is 'disable'
    unidirectional: frozenset = frozenset()  # ... 'unidirectional'; the others' is 'bidirectional'
    names: dict = field(default_factory=dict)  # variant names for the N and D flags (getVariantNames)
    code_sep: str = ":"  # getDescCodeSeparator / getDescVarSeparator (D flag)
    var_sep: str = ";"
    flags: dict = field(default_factory=dict)  # getAdditionalFlags(): text -> flag
    aliases: dict = field(default_factory=dict)  # BCP 47 spellings (LanguageCode::bcp47), lower case -> code

    @property
    def view(self) -> str:
        return self.default or self.main

    def fallbacks_of(self, variant: str) -> tuple:
        # LanguageConverter::getVariantFallbacks: the static default when none is declared.
        return self.fallbacks.get(variant, (self.view,))

    def validate(self, code: str) -> str | None:
        code = code.lower()  # LanguageConverter::validateVariant is case-insensitive
        code = self.aliases.get(code, code)
        return code if code in self.variants else None


def _conv(main, variants, fallbacks=None, **kw) -> Converter:
    fallbacks = {k: (v,) if isinstance(v, str) else tuple(v) for k, v in (fallbacks or {}).items()}
    return Converter(main, tuple(variants), fallbacks, **kw)


_ZH_NAMES = {"zh": "原文", "zh-hans": "简体", "zh-hant": "繁體", "zh-cn": "大陆", "zh-tw": "臺灣", "zh-hk": "香港",
             "zh-mo": "澳門", "zh-sg": "新加坡", "zh-my": "大马"}
CONVERTERS = {
    "zh": _conv("zh", ["zh", "zh-hans", "zh-hant", "zh-cn", "zh-hk", "zh-mo", "zh-my", "zh-sg", "zh-tw"], {
        "zh": ["zh-hans", "zh-hant", "zh-cn", "zh-tw", "zh-hk", "zh-sg", "zh-mo", "zh-my"],
        "zh-hans": ["zh-cn", "zh-sg", "zh-my"], "zh-hant": ["zh-tw", "zh-hk", "zh-mo"],
        "zh-cn": ["zh-hans", "zh-sg", "zh-my"], "zh-sg": ["zh-my", "zh-hans", "zh-cn"],
        "zh-my": ["zh-sg", "zh-hans", "zh-cn"], "zh-tw": ["zh-hant", "zh-hk", "zh-mo"],
        "zh-hk": ["zh-mo", "zh-hant", "zh-tw"], "zh-mo": ["zh-hk", "zh-hant", "zh-tw"]},
        disabled=frozenset({"zh"}), unidirectional=frozenset({"zh-hans", "zh-hant"}), names=_ZH_NAMES,
        code_sep="：", var_sep="；"),
    "gan": _conv("gan", ["gan", "gan-hans", "gan-hant"],
                 {"gan": ["gan-hans", "gan-hant"], "gan-hans": "gan", "gan-hant": "gan"},
                 disabled=frozenset({"gan"}), names={"gan": "原文", "gan-hans": "简体", "gan-hant": "繁體"},
                 var_sep="; "),
    "wuu": _conv("wuu", ["wuu", "wuu-hans", "wuu-hant"],
                 {"wuu": ["wuu-hans", "wuu-hant"], "wuu-hans": "wuu", "wuu-hant": "wuu"},
                 disabled=frozenset({"wuu"}), names={"wuu": "原文", "wuu-hans": "简体", "wuu-hant": "正體"},
                 code_sep="：", var_sep="；"),
    "sr": _conv("sr", ["sr", "sr-ec", "sr-el"], {"sr": "sr-ec", "sr-ec": "sr", "sr-el": "sr"},
                names={"sr": "српски / srpski", "sr-ec": "српски (ћирилица)", "sr-el": "srpski (latinica)"},
                flags={"S": "S", "писмо": "S", "pismo": "S", "W": "W", "реч": "W", "reč": "W", "ријеч": "W",
                       "riječ": "W"},
                aliases={"sr-cyrl": "sr-ec", "sr-latn": "sr-el"}),
    # KkConverter.php is still in MediaWiki's tree though kk left $languagesWithVariants; kkwiki's
    # pages carry the markup.
    "kk": _conv("kk", ["kk", "kk-cyrl", "kk-latn", "kk-arab", "kk-kz", "kk-tr", "kk-cn"],
                {"kk": "kk-cyrl", "kk-cyrl": "kk", "kk-latn": "kk", "kk-arab": "kk", "kk-kz": "kk-cyrl",
                 "kk-tr": "kk-latn", "kk-cn": "kk-arab"}),
    "ku": _conv("ku", ["ku", "ku-arab", "ku-latn"], {"ku": "ku-latn", "ku-arab": "ku-latn", "ku-latn": "ku-arab"}),
    "uz": _conv("uz", ["uz", "uz-latn", "uz-cyrl"], {"uz": "uz-latn", "uz-cyrl": "uz", "uz-latn": "uz"}),
    "tg": _conv("tg", ["tg", "tg-latn"], names={"tg": "тоҷикӣ", "tg-latn": "tojikī"}),
    "shi": _conv("shi", ["shi", "shi-tfng", "shi-latn"],
                 {"shi": ["shi-latn", "shi-tfng"], "shi-tfng": "shi", "shi-latn": "shi"},
                 names={"shi-latn": "Taclḥit", "shi-tfng": "ⵜⴰⵛⵍⵃⵉⵜ"}),
    "iu": _conv("iu", ["iu", "ike-cans", "ike-latn"], {"iu": "ike-cans", "ike-cans": "iu", "ike-latn": "iu"}),
    "crh": _conv("crh", ["crh", "crh-cyrl", "crh-latn"],
                 {"crh": "crh-latn", "crh-cyrl": "crh-latn", "crh-latn": "crh-cyrl"}),
    "ban": _conv("ban", ["ban", "ban-bali", "ban-x-dharma", "ban-x-palmleaf", "ban-x-pku"],
                 {"ban-bali": "ban", "ban-x-dharma": "ban", "ban-x-palmleaf": "ban", "ban-x-pku": "ban"}),
    "mni": _conv("mni", ["mni", "mni-beng"], {"mni-beng": "mni"}),
    # sh has no variant "sh": its readers get sh-latn (LanguageConverter::$languagesWithStaticDefaultVariant).
    "sh": _conv("sh", ["sh-latn", "sh-cyrl"], {"sh-cyrl": "sh-latn"}, default="sh-latn"),
    "tly": _conv("tly", ["tly", "tly-cyrl"], {"tly-cyrl": "tly"}),
    "zgh": _conv("zgh", ["zgh", "zgh-latn"]),
}
# LanguageConverter::getVarSeparatorPattern: a `;` separates rules only before a variant code and
# `:` (or `from=>code:`), or at the end; any other `;` is text.
_SEP_RE = {
    lang: re.compile(r";\s*(?=(?:{v})\s*:|[^;]*?=>\s*(?:{v})\s*:|\s*$)".format(
        v="|".join(re.escape(c) for c in sorted({*conv.variants, *conv.aliases}, key=len, reverse=True))), re.I)
    for lang, conv in CONVERTERS.items()
}


def check_variants(pairs) -> dict:
    """`("zh=zh-hans", ...)` -> {"zh": "zh-hans"}; a ValueError names every unknown language or variant."""
    chosen, bad = {}, []
    for pair in pairs:
        lang, _, variant = str(pair).partition("=")
        conv = CONVERTERS.get(lang.strip().lower())
        code = conv.validate(variant.strip()) if conv else None
        if code is None:
            bad.append(str(pair))
        else:
            chosen[lang.strip().lower()] = code
    if bad:
        known = "; ".join(f"{lang}: {' '.join(conv.variants)}" for lang, conv in CONVERTERS.items())
        raise ValueError(f"unknown language variant(s): {', '.join(bad)} (known: {known})")
    return chosen


def render(wikitext: str, lang: str, variant: str = "", table: dict | None = None) -> tuple[str, int]:
    """The wikitext with every `-{...}-` replaced by what `variant` (default: the wiki's own
    view) shows, and how many were rendered. Text of other languages is returned as is.
    `table`, for a whole-page conversion to `variant`: what the constructs show is protected (the
    module docstring), and the page's manual rules for `variant` are added to it ({from: to})."""
    conv = CONVERTERS.get(lang)
    if conv is None or "-{" not in wikitext:
        return wikitext, 0
    variant = variant or conv.view
    if "<nowiki" not in wikitext.lower():
        return _render(wikitext, conv, variant, table)
    out, count = [], 0
    for i, piece in enumerate(_NOWIKI_RE.split(wikitext)):  # odd pieces: <nowiki>...</nowiki>
        if i % 2 == 0:
            piece, n = _render(piece, conv, variant, table)
            count += n
        out.append(piece)
    return "".join(out), count


def _render(text: str, conv: Converter, variant: str, table: dict | None = None) -> tuple[str, int]:
    # LanguageConverter::recursiveConvertTopLevel / recursiveConvertRule, with a stack instead of recursion.
    stack, pos, count = [[]], 0, 0
    start = 0  # of the outermost construct open
    for m in _TOKEN_RE.finditer(text):
        stack[-1].append(text[pos:m.start()])
        pos, token = m.end(), m.group()
        if token == "-{":
            if len(stack) > MAX_DEPTH:
                stack[-1].append(token)
            else:
                start = m.start() if len(stack) == 1 else start
                stack.append([])
        elif token == "}-":
            if len(stack) == 1:
                stack[-1].append(token)  # a stray `}-` is text, as on the wiki
            else:
                inner = "".join(stack.pop())
                shown, convertible = _shown(inner, conv, variant, table)
                if table is not None and len(stack) == 1 and not convertible and not _on_heading(text, start):
                    shown = _protect(shown)
                stack[-1].append(shown)
                count += 1
        else:  # a blank line or a heading: unclosed constructs end here, their `-{` dropped
            while len(stack) > 1:
                inner = "".join(stack.pop())
                stack[-1].append(inner)
            stack[-1].append(token)
    stack[-1].append(text[pos:])
    while len(stack) > 1:
        inner = "".join(stack.pop())
        stack[-1].append(inner)
    return "".join(stack[0]), count


def _on_heading(text: str, pos: int) -> bool:
    # A construct cannot reach into a heading line (one ends it), but it can start on one.
    return text.startswith("=", text.rfind("\n", 0, pos) + 1)


def _protect(shown: str) -> str:
    """`shown` between the protection marks, its blank ends outside (the cleaner tidies spaces and
    line breaks as without the marks); blank text is not marked."""
    core = shown.strip()
    if not core:
        return shown
    start = shown.index(core)
    return f"{shown[:start]}{PROTECT_OPEN}{core}{PROTECT_CLOSE}{shown[start + len(core):]}"


def display(inner: str, conv: Converter, variant: str) -> str:
    """What `-{inner}-` shows in `variant`: ConverterRule::parse, then getDisplay."""
    return _shown(inner, conv, variant)[0]


def _shown(inner: str, conv: Converter, variant: str, table: dict | None = None) -> tuple[str, bool]:
    """`display`, and whether a whole-page conversion converts it; the rule's pairs for `variant`
    are added to `table` when given."""
    flags, rules = _parse_flags(inner, conv)
    if isinstance(flags, set):  # `-{zh-hans;zh-hant|text}-`: MediaWiki converts text to the variant (or a
        # fallback) named, else shows it as written; without a conversion we keep it as written
        return rules, not flags.isdisjoint((variant, *conv.fallbacks_of(variant)))
    bid, unid = {}, {}
    if "R" not in flags and "N" not in flags:
        bid, unid = _parse_rules(rules.replace("=&gt;", "=>"), conv)
    if not bid and not unid:
        if "+" in flags or "-" in flags:
            if rules:
                bid = dict.fromkeys(conv.variants, rules)
        elif "N" not in flags and "T" not in flags:
            flags = {"R": True}
    shown = None  # None: MediaWiki's "converter-manual-rule-error" message; we show nothing
    for flag in flags:  # in insertion order, as PHP's foreach: the last display-setting flag wins
        if flag == "R":
            shown = rules
        elif flag == "N":
            shown = conv.names.get(rules.strip(), rules.strip() if conv.validate(rules.strip()) else "")
        elif flag == "D":
            shown = _describe(bid, unid, conv)
        elif flag in ("H", "-", "+", "T"):
            shown = ""
        elif flag == "S":
            shown = _converted(bid, unid, rules, conv, variant)
    if table is not None and "+" in flags:  # A and H: LanguageConverter::applyManualConv, action 'add'
        table.update(_rule_pairs(bid, unid, conv, variant))
    return shown or "", False


def _parse_flags(inner: str, conv: Converter):
    """(flags in order as a dict, rules text); flags is a set of variant codes for `-{zh-hans|...}-`."""
    sep = _top_level_pipe(inner)
    flags = {}
    if sep >= 0:
        for f in inner[:sep].split(";"):
            f = f.strip()
            flag = _FLAGS.get(f) or conv.flags.get(f) or (f if f in conv.variants else None)
            if flag:
                flags[flag] = True
        inner = inner[sep + 1:]
    if not flags:
        return {"S": True}, inner
    for only in ("R", "N", "-"):
        if only in flags:
            return {only: True}, inner
    if list(flags) == ["T"]:
        return {"T": True, "H": True}, inner
    if "H" in flags:
        return {"+": True, "H": True, **{f: True for f in ("T", "D") if f in flags}}, inner
    if "A" in flags:
        flags["+"] = flags["S"] = True
    if "D" in flags:
        flags.pop("S", None)
    variant_flags = {f for f in flags if f in conv.variants}
    return (variant_flags, inner) if variant_flags else (flags, inner)


def _top_level_pipe(text: str) -> int:
    if "|" not in text:
        return -1
    depth = 0
    for m in _PIPE_SCAN_RE.finditer(text):
        token = m.group()
        if token in ("[[", "{{"):
            depth += 1
        elif token in ("]]", "}}"):
            depth = max(0, depth - 1)
        elif depth == 0:
            return m.start()
    return -1


def _parse_rules(rules: str, conv: Converter) -> tuple[dict, dict]:
    """ConverterRule::parseRules: {variant: text} and {variant: {from: to}}; both empty when a
    rule names no known variant (then the whole text shows raw)."""
    bid, unid = {}, {}
    protected = _ENTITY_SEMI_RE.sub("\\1\x01", rules)
    for choice in _SEP_RE[conv.main].split(protected):
        choice = choice.replace("\x01", ";")
        if ":" not in choice:
            continue  # "syntax error, skip"
        code, to = choice.split(":", 1)
        to, parts = to.strip(), code.strip().split("=>", 1)
        valid = conv.validate(parts[-1].strip())
        if len(parts) == 1 and to and valid:
            bid[valid] = to
        elif len(parts) == 2 and parts[0].strip() and valid:
            unid.setdefault(valid, {})[parts[0].strip()] = to
        if valid is None:
            return {}, {}
    return bid, unid


def _converted(bid: dict, unid: dict, rules: str, conv: Converter, variant: str) -> str | None:
    """ConverterRule::getRuleConvertedStr: the variant's text, else its fallbacks', else a
    unidirectional rule's, else (manual conversion disabled: the main view) the first text."""
    if not bid and not unid:
        return rules
    for code in (variant, *conv.fallbacks_of(variant)):
        if code in bid:
            return bid[code]
    if variant in unid:
        return next(iter(unid[variant].values()))
    if variant in conv.disabled:
        return next(iter(bid.values())) if bid else next(iter(next(iter(unid.values())).values()))
    return None


def _rule_pairs(bid: dict, unid: dict, conv: Converter, variant: str) -> dict:
    """ConverterRule::generateConvTable, the part for `variant`: each other variant's text becomes
    `variant`'s (when its manual level is bidirectional; missing texts filled from the fallbacks),
    then its one-way rules, which win (bidirectional or unidirectional level)."""
    if variant in conv.disabled:
        return {}
    pairs = {}
    if variant not in conv.unidirectional:
        filled = {}
        for v in conv.variants:
            text = bid.get(v) or next((bid[f] for f in conv.fallbacks_of(v) if bid.get(f)), None)
            if text:
                filled[v] = text
        if variant in filled:
            pairs = {text: filled[variant] for v, text in filled.items() if v != variant}
    return {**pairs, **unid.get(variant, {})}


def _describe(bid: dict, unid: dict, conv: Converter) -> str:
    """ConverterRule::getRulesDesc (the D flag): `name:text;` per rule, `from⇒name:text;` per one-way rule."""
    text = "".join(f"{conv.names.get(k, k)}{conv.code_sep}{v}{conv.var_sep}" for k, v in bid.items())
    for k, pairs in unid.items():
        text += "".join(f"{frm}⇒{conv.names.get(k, k)}{conv.code_sep}{to}{conv.var_sep}" for frm, to in pairs.items())
    return text
