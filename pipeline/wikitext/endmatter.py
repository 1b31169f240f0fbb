"""End-matter section titles, per language (pipeline/wikitext/clean.py, the end-matter rule).

References, notes, bibliographies, reading lists, external links and "see also" lists are the
end of most articles: citations and lists of titles, not prose, and the same few headings on
every page. The cleaner drops such a section, with its subsections, unless
`PreprocessConfig.keep_end_matter` is set, and counts each heading it drops.

To add a language or a title: add a line below. Titles are compared after `normalize` (NFC,
case-folded, spaces collapsed, a trailing ":" or "." dropped). A page whose language has no
entry is compared with every language's titles.
"""

import unicodedata

_TITLES = {
    "en": "References | Notes | Footnotes | Citations | Sources | Bibliography | Further reading | "
          "External links | See also | Notes and references | References and notes | Notes and citations | "
          "Citations and notes | References and sources | Sources and references | References and further reading | "
          "Notes and further reading | Works cited | Cited works | Cited texts | Cited sources | Literature cited | "
          "General references | General and cited references | Explanatory notes | Reference notes | "
          "Selected bibliography | Further reading and external links | Other reading | Related articles",
    "de": "Einzelnachweise | Anmerkungen | Fußnoten | Quellen | Belege | Literatur | Weblinks | Siehe auch | "
          "Anmerkungen und Einzelnachweise | Quellen und Einzelnachweise | Literatur und Weblinks | "
          "Weiterführende Literatur",
    "fr": "Notes et références | Notes | Références | Sources | Bibliographie | Liens externes | Voir aussi | "
          "Articles connexes | Annexes | Pour approfondir | Lien externe | Notes et sources",
    "es": "Referencias | Notas | Notas y referencias | Fuentes | Bibliografía | Enlaces externos | Véase también | "
          "Lecturas adicionales | Lectura adicional | Otras lecturas",
    "ru": "Примечания | Комментарии | Источники | Литература | Ссылки | См. также | Сноски | Библиография | "
          "Литература и ссылки | Дополнительная литература",
    "zh": "参考文献 | 參考文獻 | 参考资料 | 參考資料 | 参考来源 | 參考來源 | 注释 | 註釋 | 脚注 | 腳註 | 外部链接 | 外部連結 | "
          "参见 | 參見 | 参看 | 延伸阅读 | 延伸閱讀 | 相关条目 | 相關條目 | 书目 | 書目",
    "ja": "脚注 | 注釈 | 出典 | 参考文献 | 参考資料 | 関連項目 | 外部リンク | 関連文献 | 関連書籍 | 注釈・出典 | 脚注・出典",
    "ko": "각주 | 주석 | 출처 | 참고 문헌 | 참고문헌 | 참고 자료 | 외부 링크 | 같이 보기 | 함께 보기 | 더 읽을거리 | 더 읽어보기",
    "ar": "المراجع | مراجع | المصادر | مصادر | الهوامش | هوامش | ملاحظات | وصلات خارجية | روابط خارجية | "
          "انظر أيضا | انظر أيضًا | اقرأ أيضا | قراءات إضافية | قراءات أخرى | ببليوغرافيا | المراجع والمصادر | "
          "مصادر ومراجع",
    "hi": "सन्दर्भ | संदर्भ | टिप्पणियाँ | टिप्पणी | बाहरी कड़ियाँ | बाहरी कडियाँ | इन्हें भी देखें | यह भी देखें | "
          "सन्दर्भ ग्रन्थ | संदर्भ ग्रंथ | ग्रन्थसूची | ग्रंथसूची | अतिरिक्त पठन",
}


def normalize(title: str) -> str:
    return " ".join(unicodedata.normalize("NFC", title).casefold().split()).rstrip(":.：").strip()


END_MATTER = {lang: frozenset(normalize(t) for t in titles.split("|")) for lang, titles in _TITLES.items()}
_ANY = frozenset().union(*END_MATTER.values())


def is_end_matter(title: str, lang: str) -> bool:
    """Whether a rendered heading title names an end-matter section on `lang`'s wiki."""
    return normalize(title) in END_MATTER.get(lang, _ANY)
