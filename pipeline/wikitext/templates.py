"""Inline templates that carry words of their sentence, rendered as those words (pipeline/wikitext/clean.py, the templates rule).

Templates are dropped (infoboxes, navigation, citations, maintenance tags) except the ones
below, which put words into running text: "an area of {{convert|52419|sqmi}}" must read "an area
of 52,419 square miles", not "an area of." (the holes benchmarks/text_quality.py counts).
`lookup(name, lang)` answers before any parameter is rendered, so a dropped infobox costs
nothing. Its answer is one of:
- a renderer `f(positional, named) -> str`, called with the parameters already rendered to
  text by pipeline/wikitext/render.py (links as their text, nested templates by these same rules);
- a drop reason (contract.schema.CONSTRUCT_DROPS), counted;
- FALLBACK: a name not known here. The walker keeps the template's text only where that is
  safe: one positional parameter and no named one, plain text (no markup), at most
  `FALLBACK_CHARS`, and inside a sentence. Position is judged on the final text
  (pipeline/wikitext/clean.py): kept text marked with FALLBACK_OPEN / FALLBACK_CLOSE that stands on a
  line of its own (a hatnote or navigation template) or right after a clause's punctuation
  (a footnote's place) is dropped after all.

Renderings follow what the wiki displays, shortened where the display is a computation: convert
gives the value in its first unit (spelled out, as the wiki does unless abbr=on), not the
converted value in parentheses; date templates give the date in the English wiki's default
order; an age that needs today's date is left out.

To add a template: one entry in `_BY_NAME` (every wiki), or in `_BY_LANG[lang]` for one wiki's
own name; names are compared case-folded, "_" as " ".
"""

import re

FALLBACK = object()
FALLBACK_OPEN, FALLBACK_CLOSE = "\x01", "\x02"  # XML 1.0 forbids both: no dump page contains them
FALLBACK_CHARS = 80


def first(pos, named):
    return pos[0] if pos else ""


def last(pos, named):
    return pos[-1] if pos else ""


def second(pos, named):
    return pos[1] if len(pos) > 1 else first(pos, named)


def after_code(pos, named):
    """{{lang|fr|texte}}, {{transl|ar|ALA|Allāh}}: the last parameter, never the lone code."""
    return pos[-1] if len(pos) > 1 else ""


def joined(sep):
    return lambda pos, named: sep.join(p for p in pos if p)


def const(text):
    return lambda pos, named: text


def wrapped(left, right, pick=first):
    return lambda pos, named: f"{left}{t}{right}" if (t := pick(pos, named)) else ""


def prefixed(prefix, pick=first):
    return lambda pos, named: f"{prefix}{t}" if (t := pick(pos, named)) else ""


def paragraph(pos, named):
    """Block quotations: prose of the article, on lines of their own."""
    text = named.get("text") or named.get("quote") or (pos[0] if pos else "")
    return f"\n{text}\n" if text else ""


# --- numbers, units, dates --------------------------------------------------------------------
_NUMBER_RE = re.compile(r"-?\d{4,}(?:\.\d+)?")


def number(value: str) -> str:
    """Thousands separators, as {{convert}} and {{val}} display a plain number of 4+ digits."""
    if not _NUMBER_RE.fullmatch(value):
        return value
    whole, dot, frac = value.partition(".")
    return f"{int(whole):,}" + dot + frac


# code -> (symbol, name, plural); the wiki spells the input unit out unless abbr=on.
_UNITS = {
    "km": ("km", "kilometre"), "m": ("m", "metre"), "cm": ("cm", "centimetre"), "mm": ("mm", "millimetre"),
    "mi": ("mi", "mile"), "ft": ("ft", "foot", "feet"), "in": ("in", "inch", "inches"), "yd": ("yd", "yard"),
    "nmi": ("nmi", "nautical mile"), "km2": ("km²", "square kilometre"), "m2": ("m²", "square metre"),
    "sqmi": ("sq mi", "square mile"), "mi2": ("sq mi", "square mile"), "sqft": ("sq ft", "square foot", "square feet"),
    "ft2": ("sq ft", "square foot", "square feet"), "ha": ("ha", "hectare"), "acre": ("acres", "acre"),
    "kg": ("kg", "kilogram"), "g": ("g", "gram"), "t": ("t", "tonne"), "lb": ("lb", "pound"), "oz": ("oz", "ounce"),
    "ST": ("short tons", "short ton"), "LT": ("long tons", "long ton"),
    "C": ("°C", "degree Celsius", "degrees Celsius"), "F": ("°F", "degree Fahrenheit", "degrees Fahrenheit"),
    "K": ("K", "kelvin"), "km/h": ("km/h", "kilometre per hour", "kilometres per hour"),
    "mph": ("mph", "mile per hour", "miles per hour"), "m/s": ("m/s", "metre per second", "metres per second"),
    "kn": ("kn", "knot"), "L": ("L", "litre"), "l": ("L", "litre"), "m3": ("m³", "cubic metre"),
    "km3": ("km³", "cubic kilometre"), "cuft": ("cu ft", "cubic foot", "cubic feet"), "USgal": ("US gal", "US gallon"),
    "impgal": ("imp gal", "imperial gallon"), "ly": ("ly", "light-year"), "AU": ("AU", "astronomical unit"),
    "pc": ("pc", "parsec"), "W": ("W", "watt"), "kW": ("kW", "kilowatt"), "MW": ("MW", "megawatt"),
    "hp": ("hp", "horsepower", "horsepower"), "J": ("J", "joule"), "kJ": ("kJ", "kilojoule"),
    "lbf": ("lbf", "pound-force", "pounds-force"), "N": ("N", "newton"), "kN": ("kN", "kilonewton"),
}
_UNIT_SCALE = {"e3": "thousand", "e6": "million", "e9": "billion"}
# {{convert|5|to|10|km}}: words between the values of a range
_RANGE = {"-": "–", "–": "–", "to": " to ", "and": " and ", "or": " or ", "x": " × ", "×": " × ", "by": " by ",
          "+/-": " ± ", "±": " ± ", "to(-)": " to ", "and(-)": " and ", "or(-)": " or ", "+": " + "}
_US = {"metre": "meter", "litre": "liter"}


def unit(code: str, value: str, named: dict, adjective: bool) -> str:
    scale = _UNIT_SCALE.get(code[:2]) if code[:1] == "e" and code[1:2].isdigit() else None
    entry = _UNITS.get(code[2:] if scale else code)
    if entry is None:
        return code
    if named.get("abbr") in ("on", "yes", "values") and not scale:
        return entry[0]
    name = entry[1] if adjective or value in ("1", "one") else (entry[2] if len(entry) > 2 else entry[1] + "s")
    if named.get("sp") == "us":
        for uk, us in _US.items():
            name = name.replace(uk, us)
    return f"{scale} {name}" if scale else name


def convert(pos, named, abbr=None):
    """{{convert|52419|sqmi|km2}} -> "52,419 square miles"; ranges; adj=on -> "5-mile"."""
    if abbr:
        named = {**named, "abbr": abbr}
    if not pos:
        return ""
    values, i = number(pos[0]), 1
    while i + 1 < len(pos) and pos[i] in _RANGE:
        values += _RANGE[pos[i]] + number(pos[i + 1])
        i += 2
    if i >= len(pos):
        return values
    adjective = named.get("adj") in ("on", "yes")
    word = unit(pos[i], pos[0], named, adjective)
    return f"{values}-{word}" if adjective and " " not in word else f"{values} {word}"


_MUSIC = {"flat": "♭", "sharp": "♯", "natural": "♮", "b": "♭", "#": "♯"}
_MONTHS = ("January February March April May June July August September October November December").split()


def date(pos, named, n=0):
    """(year, month, day) from positional n.. -> "February 12, 1809" (df=y: "12 February 1809")."""
    parts = [p.strip() for p in pos[n : n + 3]]
    if not parts or not parts[0]:
        return ""
    year, month, day = (parts + ["", ""])[:3]
    if month.isdigit() and 1 <= int(month) <= 12:
        month = _MONTHS[int(month) - 1]
    day = str(int(day)) if day.isdigit() else day
    if not month:
        return year
    if not day:
        return f"{month} {year}"
    dmy = named.get("df", "").lower() in ("y", "yes") or named.get("format", "").lower() == "dmy"
    return f"{day} {month} {year}" if dmy else f"{month} {day}, {year}"


def death_date_and_age(pos, named):
    text = date(pos, named)
    try:
        y, m, d, by, bm, bd = (int(p) for p in pos[:6])
        text += f" (aged {y - by - ((m, d) < (bm, bd))})"
    except ValueError:
        pass
    return text


def as_of(pos, named):
    text = "as of " if named.get("lc") in ("y", "yes", "on") else "As of "
    return text + date(pos, named) if pos else ""


def frac(pos, named):
    if len(pos) == 1:
        return f"1/{pos[0]}"
    if len(pos) == 2:
        return f"{pos[0]}/{pos[1]}"
    return f"{pos[0]} {pos[1]}/{pos[2]}" if len(pos) >= 3 else ""


def val(pos, named):
    """{{val|6.241|e=18|u=C}} -> "6.241×10^18 C"; {{val|1.00794|(7)}} -> "1.00794(7)"."""
    text = number(pos[0]) if pos else ""
    if len(pos) > 1 and pos[1]:
        text += pos[1] if pos[1].startswith("(") else f"±{pos[1]}"
    if named.get("e"):
        text += f"×10^{named['e']}"
    unit_text = named.get("u") or named.get("ul") or ""
    return f"{text} {unit_text}" if unit_text else text


def ipac(pos, named):
    """{{IPAc-en|US|ə|ˈ|p|ɒ|l|oʊ}} -> "US: /əˈpɒloʊ/"; "," separates variants, each with its own label."""
    variants, words, sounds = [], [], []
    for p in [*pos, ","]:
        if p == ",":
            if sounds:
                variants.append(" ".join([*words, "/" + "".join(sounds).strip() + "/"]))
            words, sounds = [], []
        elif p in _IPAC_WORDS and not sounds:
            words.append(_IPAC_WORDS[p])
        else:
            sounds.append(" " if p == "_" else p)
    return ", ".join(variants)


_IPAC_WORDS = {"lang": "English pronunciation:", "pron": "pronounced", "local": "locally", "US": "US:", "UK": "UK:",
               "AU": "Australian:", "CA": "Canadian:", "NZ": "NZ:", "also": "also", "or": "or"}


def nihongo(pos, named):
    """{{Nihongo|Aikido|合気道|Aikidō}} -> "Aikido (合気道, Aikidō)"."""
    english, rest = (pos[0] if pos else ""), [p for p in pos[1:3] if p]
    if not english:
        return f"{rest[0]} ({', '.join(rest[1:])})" if len(rest) > 1 else (rest[0] if rest else "")
    return f"{english} ({', '.join(rest)})" if rest else english


def yomigana(pos, named):
    """{{読み仮名|漢字|よみがな|備考}} -> "漢字（よみがな、備考）": jawiki shows the reading, then the note,
    in full-width parentheses after the term, in the line (its ruby is laid out inline, not above
    the term; {{読み仮名 ruby不使用}} writes the same text without ruby)
    (https://ja.wikipedia.org/wiki/Template:読み仮名)."""
    term, rest = (pos[0] if pos else ""), [p for p in pos[1:3] if p]
    return f"{term}（{'、'.join(rest)}）" if rest else term


def marriage(pos, named):
    """{{marriage|Mary Todd|1842|1865}} -> "Mary Todd (m. 1842–1865)"."""
    years = "–".join(p for p in pos[1:3] if p)
    return f"{pos[0]} (m. {years})" if pos and years else first(pos, named)


def coord(pos, named):
    """Inline coordinates as displayed: "42°30′N 1°30′E"; title-only ones are not in the text."""
    if named.get("display", "inline").replace(" ", "") == "title":
        return ""
    fields = [p for p in pos if ":" not in p]
    for i, p in enumerate(fields):
        if p in ("N", "S"):
            lat, rest = fields[:i], fields[i + 1 :]
            for j, q in enumerate(rest):
                if q in ("E", "W"):
                    return f"{_dms(lat)}{p} {_dms(rest[:j])}{q}"
            return ""
    if len(fields) >= 2:
        try:
            lat, lon = float(fields[0]), float(fields[1])
        except ValueError:
            return ""
        return f"{abs(lat)}°{'N' if lat >= 0 else 'S'} {abs(lon)}°{'E' if lon >= 0 else 'W'}"
    return ""


def _dms(parts):
    return "".join(f"{p}{mark}" for p, mark in zip(parts, "°′″") if p)


def ill(pos, named):
    """enwiki's {{Interlanguage link|Local title|de|Fremder Titel|lt=shown text}} ({{ill}}, {{interlanguage
    link multi}}): lt= if given, else the local title, parameter 1; the language codes and foreign
    titles after it are the bracketed links, not the text
    (https://en.wikipedia.org/wiki/Template:Interlanguage_link)."""
    return named.get("lt") or first(pos, named)


def kari_link(pos, named):
    """{{仮リンク|メーヘーン (ゲーム)|en|Mehen (game)|label=メーヘーン}} -> "メーヘーン": jawiki's
    interlanguage link shows label= in place of the local title (a title with its disambiguation,
    a section); its other named parameters (redirect=, preserve=) change where it links, not what
    it shows (https://ja.wikipedia.org/wiki/Template:仮リンク). {{ill2}}, {{illm}} and
    {{link-interwiki}} are jawiki's redirects to it (and enwiki's to {{ill}}, whose lt= it reads too)."""
    return named.get("label") or ill(pos, named)


def link_helper(pos, named):
    """zhwiki's {{Link-en|中文名|English name|顯示文字}} ({{Link-ja}}, {{Link-de}}.., {{le}}, all
    {{Internal link helper}} / {{ilh}} with lang-code=): the 3rd parameter (or d=) is shown in
    place of the local title, parameter 1; parameter 2 is the foreign title, not shown
    (https://zh.wikipedia.org/wiki/Template:Internal_link_helper, https://zh.wikipedia.org/wiki/Template:Link-en)."""
    return named.get("d") or (pos[2] if len(pos) > 2 else "") or first(pos, named)


def translink(pos, named):
    """zhwiki's {{Translink|en|Foreign title|本地條目|顯示文字}} ({{tsl}}): the 4th parameter if given,
    else the local title (3rd), else the foreign title (2nd) it defaults to; parameter 1 is the
    language code (https://zh.wikipedia.org/wiki/Template:Translink)."""
    return next((pos[i] for i in (3, 2, 1) if len(pos) > i and pos[i]), "")


def lien(pos, named):
    """frwiki's {{Lien|fr=Titre français|lang=en|trad=English title|texte=texte affiché}}: texte= if
    given, else the French title (fr= or parameter 1), else the foreign title trad= it then links
    (https://fr.wikipedia.org/wiki/Modèle:Lien)."""
    return named.get("texte") or named.get("fr") or first(pos, named) or named.get("trad", "")


def ne_perevedeno(pos, named):
    """ruwiki's {{нп5|Русское название|текст ссылки|en|English title}} ({{нп3}}, {{iw}}; ukwiki's
    {{iw}}) and the named {{не переведено|есть=:en:Title|надо=Русское название|текст=..}}: the link
    text (parameter 2, текст=), else the local title (parameter 1, надо=, ukwiki's треба=); the
    language code and the foreign title are the bracketed link
    (https://ru.wikipedia.org/wiki/Шаблон:Не_переведено_5, https://ru.wikipedia.org/wiki/Шаблон:Не_переведено,
    https://uk.wikipedia.org/wiki/Шаблон:Не_перекладено)."""
    text = named.get("текст") or (pos[1] if len(pos) > 1 else "")
    return text or named.get("надо") or named.get("треба") or first(pos, named)


def ar_interlanguage(pos, named):
    """arwiki's {{وصلة إنترويكي|عر=العنوان العربي|تر=Foreign title|لغ=en|نص=النص}}: نص= (parameter 4) if
    given, else the Arabic title عر= (parameter 1); تر= / لغ= (2, 3) are the foreign link
    (https://ar.wikipedia.org/wiki/قالب:وصلة_إنترويكي)."""
    return named.get("نص") or (pos[3] if len(pos) > 3 else "") or named.get("عر") or first(pos, named)


def marked_span(pos, named):
    """{{要出典範囲|文|date=..}}, {{citation needed span|text=..|date=..}}: a maintenance tag that marks
    words of the text (highlighted, the tag's mark after them: [要出典], [citation needed]) is those
    words: the first positional parameter (`1=` when the words hold an "="), or text= on the English
    wiki; the other named parameters (date=, title=, reason=) are the tag's own
    (https://ja.wikipedia.org/wiki/Template:要出典範囲, https://en.wikipedia.org/wiki/Template:Citation_needed_span)."""
    return named.get("text") or first(pos, named)


def ship(prefix):
    """{{USS|Enterprise|CV-6}} -> "USS Enterprise (CV-6)"."""
    return lambda pos, named: f"{prefix} {pos[0]}" + (f" ({pos[1]})" if len(pos) > 1 and pos[1] else "") if pos else ""


def e_notation(pos, named):
    return f"×10^{pos[0]}" if pos else "e"


def century_fr(pos, named):
    return f"{pos[0]}e siècle" if pos else ""


# Templates whose output carries no words of the text, by reason counted.
_DROP_PREFIXES = (("infobox", "infoboxes"), ("taxobox", "infoboxes"), ("automatic taxobox", "infoboxes"),
                  ("speciesbox", "infoboxes"), ("chembox", "infoboxes"), ("drugbox", "infoboxes"),
                  ("geobox", "infoboxes"), ("карточка", "infoboxes"), ("ficha de", "infoboxes"),
                  ("基礎情報", "infoboxes"), ("معلومات ", "infoboxes"), ("صندوق معلومات", "infoboxes"),
                  ("ज्ञानसन्दूक", "infoboxes"), ("multiple image", "images"), ("double image", "images"),
                  ("triple image", "images"), ("wide image", "images"), ("css image crop", "images"),
                  ("image frame", "images"), ("gallery", "galleries"), ("cite ", "templates"),
                  ("citation", "templates"), ("sfn", "templates"), ("harv", "templates"), ("efn", "templates"),
                  ("refn", "templates"), ("reflist", "templates"), ("navbox", "templates"), ("wikt", "templates"),
                  ("commons", "templates"), ("portal", "templates"), ("use ", "templates"), ("pp-", "templates"),
                  ("flagicon", "templates"), ("anchor", "templates"), ("ipa audio", "templates"))
_DROP_SUFFIXES = ((" 정보", "infoboxes"),)
# Single names dropped though they would pass the fallback: footnote marks and invisible ones.
_DROP_NAMES = {
    **dict.fromkeys(("персона", "река", "нп", "대한민국의 시"), "infoboxes"),  # infoboxes by their own names
    **dict.fromkeys(("r", "rp", "cn", "fact", "ref label", "note label", "notetag", "要出典", "refnest", "fn", "fnz",
                     "short description", "dead link", "clarify", "page needed", "which", "when", "who", "main",
                     "see also", "further", "details", "ipa audio link", "google books", "sep", "iep", "dmoz"),
                    "templates"),
}

# zhwiki's {{Internal link helper}} languages, each with its {{Link-xx}}
# (https://zh.wikipedia.org/wiki/Template:Internal_link_helper)
_ILH_CODES = ("ar az be bg bs ca cs da de el en eo es et eu fa fi fr ga he hi hr hu hy id is it ja ka kk ko ky la lo lt "
              "lv mn ms my nl no pl pt ro ru sh sk sl so sq sr sv ta te tg th tl tr uk ur uz vi gan lzh nan yue").split()
_BY_NAME = {
    # language, script and transliteration: the foreign text itself
    "lang": after_code, "langx": after_code, "transl": after_code, "transliteration": after_code,
    "script": after_code, "rtl-lang": after_code, "llang": after_code, "native name": second, "polytonic": first,
    "unicode": first, "iast": first, "nastaliq": first, "nq": first, "linktext": joined(""), "audio": after_code,
    "nihongo": nihongo, "ruby": first, "lang-en-short": first,
    # pronunciation
    "ipac-en": ipac, "ipa": last, "ipa-all": wrapped("[", "]"), "respell": joined("-"),
    # conversions, numbers, science
    "convert": convert, "cvt": lambda p, n: convert(p, n, abbr="on"), "convertir": convert, "val": val,
    "frac": frac, "sfrac": frac, "fraction": frac, "e": e_notation, "chem": joined(""), "chem2": first,
    "simplenuclide2": joined("-"), "bartable": first, "nts": first, "ntsh": first, "gaps": joined(" "),
    "math": first, "mvar": first, "var": first, "sub": first, "sup": first, "su": joined(" "), "overline": first,
    "coord": coord, "us$": prefixed("US$"), "usd": prefixed("US$"), "gbp": prefixed("£"), "£": prefixed("£"),
    "€": prefixed("€"), "eur": prefixed("€"), "inr": prefixed("₹"),
    "us patent": prefixed("U.S. Patent "), "isbn": prefixed("ISBN "), "oclc": prefixed("OCLC "),
    "issn": prefixed("ISSN "), "doi": prefixed("doi:"), "music": lambda pos, named: _MUSIC.get(t := first(pos, named), t),
    # dates and eras
    "birth date": date, "birth date and age": date, "death date": date, "start date": date, "end date": date,
    "start date and age": date, "end date and age": date, "dts": date, "date": joined(" "),
    "death date and age": death_date_and_age, "birth year and age": first, "death year and age": first,
    "as of": as_of, "circa": prefixed("c. "), "c.": prefixed("c. "), "floruit": prefixed("fl. "),
    "fl.": prefixed("fl. "), "reign": prefixed("r. "), "r.": prefixed("r. "), "b.": prefixed("b. "),
    "d.": prefixed("d. "), "marriage": marriage,
    # text wrappers: formatting only
    "nowrap": first, "nobr": first, "nobreak": first, "small": first, "smaller": first, "big": first,
    "larger": first, "resize": last, "sc": first, "smallcaps": first, "small caps": first, "strong": first,
    "em": first, "code": first, "kbd": first, "samp": first, "tt": first, "keypress": joined(" + "),
    "abbr": first, "tooltip": first, "sic": last, "not a typo": first, "proper name": first, "vanchor": first,
    "visible anchor": first, "center": first, "color": last, "font color": last, "highlight": first,
    "lower": first, "nobold": first, "noitalic": first, "angbr": wrapped("⟨", "⟩"), "vr": first,
    "lsj": second,
    "flag": lambda pos, named: named.get("name") or first(pos, named),
    "flagcountry": first, "sortname": joined(" "), "sort": last, "bibleverse": joined(" "),
    "ubl": joined(", "), "unbulleted list": joined(", "), "hlist": joined(", "), "flatlist": first,
    "plainlist": first, "ship": joined(" "), "uss": ship("USS"), "hms": ship("HMS"), "hmas": ship("HMAS"),
    # maintenance tags that wrap words of the text: the words (the tag's mark is dropped, as 要出典's is)
    "要出典範囲": marked_span, "独自研究範囲": marked_span, "疑問点範囲": marked_span, "要検証範囲": marked_span,
    "citation needed span": marked_span, "cn-span": marked_span, "fact span": marked_span,
    "clarify span": marked_span,
    # block quotations: prose
    "quote": paragraph, "cquote": paragraph, "blockquote": paragraph, "quotation": paragraph,
    "quote box": paragraph, "poem quote": paragraph, "zitat": paragraph, "цитата": paragraph,
    # characters and spacing
    "'": const("'"), "'s": const("'s"), "`": const("'"), "·": const(" · "), "dot": const(" · "),
    "middot": const("·"), "ndash": const("–"), "mdash": const("—"), "snd": const(" – "),
    "spnd": const(" – "), "spaced ndash": const(" – "), "spaced en dash": const(" – "), "nbsp": const("\xa0"),
    "thinsp": const("\u2009"), "=": const("="), "!": const("|"), "pipe": const("|"), "okina": const("ʻ"),
    "-": const(""), "clear": const(""), "spaces": const(" "),
    # other wikis' names (de, ru, fr, es, ja, zh, ko)
    "lautschrift": wrapped("[", "]"), "polytonisch": first, "мфа": wrapped("[", "]"), "comment": first,
    "число": first, "num": first, "api": wrapped("[", "]"), "afi": wrapped("[", "]"), "unité": joined(" "),
    "nombre": joined(" "), "1er": const("1er"), "er": const("er"), "s-": century_fr, "siècle": century_fr,
    "versalita": first, "読み仮名": yomigana, "読み仮名 ruby不使用": yomigana,
    "読み": first,  # the reading only read aloud, not shown (https://ja.wikipedia.org/wiki/Template:読み)
    # interlanguage links: a local title (a red link) with links to other wikis' articles; each
    # template shows its own display parameter, else the local title
    "ill": ill, "interlanguage link": ill, "interlanguage link multi": ill,
    "仮リンク": kari_link, "ill2": kari_link, "illm": kari_link, "link-interwiki": kari_link,
    "le": link_helper, "internal link helper": link_helper, "ilh": link_helper,
    **{f"link-{code}": link_helper for code in _ILH_CODES},
    "tsl": translink, "translink": translink, "lien": lien,
    "iw": ne_perevedeno, "не переведено": ne_perevedeno, "не переведено 3": ne_perevedeno,
    "не переведено 5": ne_perevedeno, "нп3": ne_perevedeno, "нп5": ne_perevedeno,
    "وصلة إنترويكي": ar_interlanguage,
}
_BY_LANG = {
    "fr": {"citation": wrapped("« ", " »"), "date": joined(" "), "s": century_fr},
    "es": {"siglo": prefixed("siglo ")},
}
_BY_PREFIX = (("lang-", first), ("ipa-", wrapped("[", "]")), ("ipac-", ipac), ("transl-", last),
              ("internal link helper/", link_helper), ("ilh/", link_helper))


def call(spec, params: list) -> str:
    """Run a renderer on (key or None, text) parameters. As on the wiki, unnamed parameters are
    numbered 1, 2, ... in order, and a numbered key ("2=x") sets that position."""
    numbered, named, n = {}, {}, 0
    for key, text in params:
        if key is None:
            n += 1
            numbered[n] = text
        elif key.isdigit() and int(key) > 0:
            numbered[int(key)] = text
        else:
            named[key] = text
    return spec([numbered.get(i, "") for i in range(1, max(numbered, default=0) + 1)], named)


def normalize(name: str) -> str:
    return " ".join(name.replace("_", " ").split()).casefold()


def lookup(name: str, lang: str = "en"):
    """A renderer, a drop reason, or FALLBACK for the template named `name` on `lang`'s wiki."""
    key = normalize(name)
    if key.startswith("template:"):
        key = key[9:].lstrip()
    if key[:1] == "#" or ":" in key:  # a parser function or magic word ({{#if:..}}, {{DEFAULTSORT:..}})
        word, _, value = name.partition(":")
        return const(number(value.strip())) if normalize(word) == "formatnum" else "templates"
    spec = _BY_LANG.get(lang, {}).get(key) or _BY_NAME.get(key)
    if spec is not None:
        return spec
    if key in _DROP_NAMES:
        return _DROP_NAMES[key]
    for prefix, reason in _DROP_PREFIXES:
        if key.startswith(prefix):
            return reason
    for suffix, reason in _DROP_SUFFIXES:
        if key.endswith(suffix):
            return reason
    for prefix, spec in _BY_PREFIX:
        if key.startswith(prefix):
            return spec
    return FALLBACK
