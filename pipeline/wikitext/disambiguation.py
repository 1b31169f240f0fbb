"""Which articles are disambiguation pages: "Mercury may refer to: ..." lists of links to other
articles, not prose. The cleaner gives them an outcome of their own, `disambiguation`, counted
per language like redirects and not kept (pipeline/wikitext/clean.py), unless
`PreprocessConfig.keep_disambiguation`.

A page is one when its wikitext holds what its wiki marks one with:
1. The `__DISAMBIG__` magic word or a localized alias (Extension:Disambiguator, on every
   Wikimedia wiki: a page is a disambiguation page exactly when it has the word, and every
   Wikipedia's disambiguation templates emit it). A page rarely holds it itself: a dump has the
   wikitext, with the template that emits it, so
2. one of its wiki's disambiguation templates, `{{Disambiguation}}`, `{{geodis}}`, `{{消歧义}}`
   (`_TEMPLATES`: names from each wiki's Category of disambiguation templates, each one given for
   that wiki by at least one of the two public lists below), or on any wiki `{{Disambig}}` /
   `{{Disambiguation}}` (redirects to the local template on most wikis).
Template names compare as MediaWiki's titles do: `_` is a space, runs of spaces are one, in any
case (MediaWiki capitalises only the first letter; no other template of these names exists).

Set-index articles are not disambiguation pages and stay articles: a surname's or a ship
name's page lists people or ships of that name, with prose about the name (enwiki
Wikipedia:Set index articles). Their templates ({{surname}}, {{given name}}, {{shipindex}},
{{set index article}}, ruwiki's {{Фамилия}}, nowiki's {{Etternavn}}, nlwiki's {{Cognomen}})
are not listed, though the older bot lists below name some of them among disambiguation
templates. Nor is a hatnote that links to one ({{About}}, {{Other uses}}, dewiki's
{{Begriffsklärungshinweis}}) or an inline tag ({{Disambiguation needed}}): none of them is a
name below, and a name must be the whole template name.

Sources of the names:
- Magic words: Extension:Disambiguator's Disambiguator.i18n.magic.php
  (wikimedia/mediawiki-extensions-Disambiguator at efd7214, 2026-08-21).
- Templates: wtf_wikipedia's src/_data/disambig_templates.ts (each wiki's main disambiguation
  template, and enwiki's specialised ones: Category:Disambiguation message boxes) and
  pywikibot's families/wikipedia_family.py `disambiguationTemplates` (the compat release), both
  read through public code search; the pages of tests/data/wiki and pywikibot's test export
  (enwiki's {{disambiguation}}, {{Disambiguation|geo|hndis}}, {{geodis}}).
Add a wiki's names here once you have checked them on its Category of disambiguation templates.
"""

import functools
import re

# Extension:Disambiguator's magic word and its aliases (Disambiguator.i18n.magic.php): matched as
# written; MediaWiki matches them case-sensitively (the English entry's flag 1).
_MAGIC_WORDS = ("__DISAMBIG__ __توضيح__ __DƏQİQLƏŞDİRMƏ__ __ROZCESTNÍK__ __BEGRIFFSKLÄRUNG__ _MANEYOBİN_ "
                "__DISAMBIGUACIÓN__ __DISAMBIGUACION__ __TÄPSUSTUS__ __ابهام‌زدایی__ __HOMONYMIE__ __HOMÓNIMOS__ "
                "__HOMONIMOS__ __דף_פירושונים__ __פירושונים__ __बहुवि__ __曖昧さ回避__ __동음이의__ __ПОЈАСНУВАЊЕ__ "
                "__വിവക്ഷ__ __निःसंदिग्ध__ __PEKER__ __FLEIRTYDING__ __ДИСАМБИГ__ __ضد_ابہام__ __ĐỊNH_HƯỚNG__ "
                "__ĐỊNHHƯỚNG__ __消歧义__ __消除歧义__").split()
_MAGIC_RE = re.compile("|".join(re.escape(w) for w in _MAGIC_WORDS))

# Every wiki: the English names, redirects to the local template on most wikis (pywikibot lists
# Disambig on some fifty).
_ANY = "Disambig | Disambiguation"
# Per wiki, "|"-separated. enwiki's specialised ones are the variants of {{Disambiguation}} in its
# Category:Disambiguation message boxes; the box they share, {{Dmbox}}, is left out: set-index
# templates render it too.
_TEMPLATES = {
    "en": "Dab | Disamb | Disambig | Disambiguation | Geodis | Hndis | Disambiguation cleanup | "
          "Airport disambiguation | Biology disambiguation | Call sign disambiguation | Caselaw disambiguation | "
          "Chinese title disambiguation | Genus disambiguation | Hospital disambiguation | "
          "Human name disambiguation | Human name disambiguation cleanup | "
          "Letter-number combination disambiguation | Letter-NumberCombDisambig | Mathematical disambiguation | "
          "Military unit disambiguation | Music disambiguation | Number disambiguation | "
          "Opus number disambiguation | Phonetics disambiguation | Place name disambiguation | Road disambiguation | "
          "School disambiguation | Species Latin name abbreviation disambiguation | Species Latin name disambiguation | "
          "Station disambiguation | Synagogue disambiguation | Taxonomic authority disambiguation | "
          "Taxonomy disambiguation",
    "de": "Begriffsklärung | BKS",
    "fr": "Homonymie",
    "es": "Desambiguación | Desambiguacion | Desambig",
    "it": "Disambigua",
    "pt": "Desambiguação | Desambig",
    "nl": "Dp | Doorverwijspagina",
    "pl": "Ujednoznacznienie | Strona ujednoznaczniająca",
    "sv": "Förgrening",
    "fi": "Täsmennyssivu",
    "cs": "Rozcestník",
    "ru": "Неоднозначность | Многозначность",
    "uk": "Неоднозначність | Багатозначність",
    "el": "Αποσαφήνιση | Αποσαφ",
    "hy": "Երկիմաստ | Բազմիմաստություն",
    "he": "פירושונים",
    "ar": "توضيح",
    "fa": "ابهامزدایی | ابهام زدایی",
    "tr": "Anlam ayrımı",
    "hi": "बहुविकल्पी शब्द",
    "bn": "দ্ব্যর্থতা নিরসন",
    "kn": "ದ್ವಂದ್ವ ನಿವಾರಣೆ",
    "vi": "Trang định hướng | Định hướng | Hndis",
    "id": "Disambiguasi",
    "zh": "消歧义 | 消歧義 | 消歧义页",
    "ja": "Aimai | 曖昧さ回避 | Dab",
    "ko": "동음이의 | 동음이의어",
}


def _names(line: str) -> list[str]:
    return [" ".join(name.split()) for name in line.split("|") if name.strip()]


@functools.lru_cache(maxsize=None)
def _template_re(lang: str) -> re.Pattern:
    """`{{Name}}` or `{{Name|...}}` for the wiki's names and _ANY's; a `Template:` prefix, `_` for a space."""
    names = sorted({*_names(_ANY), *_names(_TEMPLATES.get(lang, ""))}, key=len, reverse=True)
    alternatives = "|".join(r"[ _]+".join(re.escape(word) for word in name.split(" ")) for name in names)
    return re.compile(rf"\{{\{{[ _\t\n]*(?:template[ _]*:[ _]*)?({alternatives})[ _\t\n]*(?:\||\}}\}})", re.I)


_COMMENT_RE = re.compile(r"<!--(?:.*?-->|[^\n]*)", re.S)  # clean.py's: an unclosed comment ends with its line


def marker(wikitext: str, lang: str) -> str | None:
    """What marks the page as a disambiguation page on `lang`'s wiki ("{{geodis}}",
    "__DISAMBIG__"), or None. A mark inside a comment is none."""
    found = _find(wikitext, lang)
    if found is not None and "<!--" in wikitext:  # rare: only a page with a mark pays for this
        found = _find(_COMMENT_RE.sub("", wikitext), lang)
    return found


def _find(wikitext: str, lang: str) -> str | None:
    if "__" in wikitext and (m := _MAGIC_RE.search(wikitext)):
        return m.group()
    if "{{" in wikitext and (m := _template_re(lang).search(wikitext)):
        return "{{" + " ".join(m.group(1).replace("_", " ").split()) + "}}"
    return None
