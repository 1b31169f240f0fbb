"""Which sections end an article: references, notes, bibliography, reading lists, external
links and "see also" (pipeline/wikitext/clean.py, the end-matter rule), on any wiki.

They are citations and lists of titles, not prose. The cleaner drops such a section, with its
subsections, unless `PreprocessConfig.keep_end_matter` is set, and counts each heading it drops.
A section is end matter by the first of three rules that says so:

1. Its title, exactly (`_TITLES`, per language; a wiki without a line is compared with every
   line's titles but the weak ones, Literatur and Литература, below). Titles are compared
   after `normalize` (NFC, case-folded, spaces collapsed, a trailing ":" or "." dropped, Han
   characters folded to simplified: `_HAN_FOLD`). Add a line or a title here for a wiki you
   have checked.
2. Its title's form (`title_form`), for the 300 wikis nobody listed: a title made up only of
   words that name end matter in many languages (`_HEAD`: "Bibliografía", "Källor",
   "Kaynakça", "Примітки"; with `_QUALIFIER` words around them: "Linki zewnętrzne", "Ver
   também", "Notes and references"), or, in scripts written without spaces, ending in such a
   word (参考书目, 研究書目, 扩展阅读; 参考著作 by its 参考 prefix) or holding one (Thai, Indic
   scripts, Vietnamese phrases). Every word must be one of these, so "Cultural references",
   "Sources of the Nile" or 名称来源 stay prose. Two kinds of words are weaker:
   - "Literature" (Literatur, Литература, Irodalom, ...) is the reading list on most wikis but
     a section about the country's literature on others (enwiki, eswiki, a Polish country
     page): such a title needs the content rule below, with a year counting as a citation.
   - reading words ("reading", "lectura", "läsning") name a reading list only with a
     qualifier ("Further reading", "Lecturas adicionales"); "Reading" alone is prose.
   Every listed title of the ten wikis but frwiki's "Annexes" (elsewhere a treaty's annexes
   are content) is also found by this rule (tests/pipeline/wikitext/test_endmatter.py): it is
   what an unlisted wiki gets.
3. Its raw wikitext body (`body_is_end_matter`, after clean.py has cut <ref>s and comments),
   whatever its title: a list whose items are at least half citations (a mark: ISBN, ISSN, DOI,
   a URL, a citation template) with at most an intro line of prose. A citation is a list item
   or a short line (under 200 characters) with such a mark; a paragraph with a URL in it is
   prose. From the first section dropped as end matter on (`tail`), a list with no prose line
   and no long item is end matter too: there it is "see also" and link lists whose titles no
   rule knew. On the real pages of tests/data/wiki and the sample this rule alone, titles
   unseen, finds 155 of the end-matter sections that hold text and no other section.
Works lists are content, on every wiki: "Works", "Selected works", "Books", "Publications",
作品, 著作, Werke are no end-matter words, and rule 3 leaves a section of such a title alone
(`_WORKS_RE`; enwiki's Alain Connes lists his own books with ISBNs under "Books"). A list of
titles with years is no citation list either. Only a listed exact title (enwiki's
"Bibliography") drops a works list.

Exact titles still win: rule 1 is checked first, and rules 2 and 3 only ever add drops.
"""

import functools
import re
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


# zhwiki's editors write headings in simplified or traditional characters and often in both at
# once (`== 参見 ==`: simplified 参, traditional 見), since MediaWiki converts each reader's view
# (convert.py); jawiki's differ from both in places (関, 釈). Every title and every listed word is
# compared with the traditional characters of the end-matter words folded to their simplified
# form, so one listed spelling finds every mix of it: 参见 finds 參見, 参見 and 參见. The pairs
# are MediaWiki's ZhConversion zh-hans mapping of each character of the words listed here (and
# of _WORKS_RE) that it changes: tests/pipeline/wikitext/test_endmatter.py checks them against
# zhconv-rs, the `variants` extra, where it is installed; the fold itself needs no package.
# Folded on every wiki: the simplified/traditional pairs name the same word in zh, gan, wuu, yue
# and lzh alike, and a title of another script has none of these characters.
_HAN_FOLD = str.maketrans({traditional: simplified for simplified, traditional in (
    "书書 关關 参參 条條 来來 注註 献獻 结結 网網 脚腳 见見 记記 读讀 资資 连連 释釋 链鏈 阅閱 项項").split()})


def normalize(title: str) -> str:
    folded = " ".join(unicodedata.normalize("NFC", title).casefold().split()).rstrip(":.：").strip()
    return folded.translate(_HAN_FOLD)


END_MATTER = {lang: frozenset(normalize(t) for t in titles.split("|")) for lang, titles in _TITLES.items()}

# Rule 2: words of end-matter titles, as regex alternatives over normalized (case-folded) words;
# a "\w*" is a suffix (Bibliografía, Bibliographie). Written in their usual case: each
# alternative goes through `normalize` once, below.
_HEAD = r"""
    bibliog\w* библиограф\w* бібліограф\w* βιβλιογραφ\w* ביבליוגרפיה ببليوغراف\w* کتاب‌شناسی pustaka kaynak\w*
    r[eé]f[eé]r[eê]n(?!d)\w* referinț\w* референц\w* παραπομπ\w* viitteet hivatkozás\w*
    sources fuentes fontes fonti fontoj quellen källor kilder lähteet bron(?:nen|vermelding\w*) izvori viri
    zdroje źródła források surse sumber iturriak allikad šaltiniai avoti источники джерела извори източници
    крыніцы πηγές מקורות منابع حوالہ
    notes? footnotes? citations? комментарии approfondir belege notas noten noter notlar notoj
    uwagi przypisy poznámky opombe napomene bilješke jegyzetek huomautukset
    catatan anmerkungen fußnoten fotnoter fodnoter voetnoten einzelnachweise nachweise примечания примітки
    бележки напомене белешки зноскі сноски σημειώσεις הערות پانویس ծանոթագրություններ სქოლიო
    links? linki linkit linkek linkler linkovi länkar lenker henvisninger liens? enlaces? ligações ligação
    ligazóns collegamenti odkazy bağlantılar pautan pranala povezave poveznice weblinks nettlenker enllaços
    estekak legături ссылки посилання спасылкі сілтемелер везе препратки σύνδεσμοι קישורים پیوند روابط وصلات
    հղումներ muualla
    also auch aussi también anche também ook även också også też též tiež aj még și ayrıca pula juga myös tudi
    još također также також таксама също επίσης גם أيضا أيضًا सुद्धा
    related connexes correlate correlati relacionados relacionadas relacionats související kapcsolódó وابسته
    cited"""
# Arabic heads take the article and "and" as a prefix (المراجع, والمصادر).
_HEAD_AR = r"(?:وال|ال|و)?(?:مراجع|مصادر|هوامش|ملاحظات|وصلات|روابط|ببليوغرافيا)"
_WEAK = r"literat\w* литератур\w* літаратур\w* літератур\w* irodalom kirjallisuu\w* kirjandus litteratur\w* ლიტერატურა"
_READING = r"""reading readings lectura lecturas leitura leituras lettura letture lecture lectures lezen läsning lesning
    पठन lektura lektury četba lectură olvasnivaló\w* bacaan okuma okumalar чтение читання قراءات قراءة לקריאה
    információk progetti"""
_QUALIFIER = r"""external externe externes externos externas externa esterni externí externé externs eksterne
    zewnętrzne külső dış luar zunanje vanjske spoljašnje спољашње внешние външни зовнішні надворешни
    εξωτερικοί חיצוניים خارجية الخارجية خارجي بیرونی بیرون به ulkoiset aiheesta kanpo արտաքին
    further additional other suggested recommended general more weitere weiterführende complémentaires?
    complementarias? complementar(?:es)? adicional(?:es)? adicionais ulteriori aggiuntive verder vidare videre
    dalsza dodatkowa další ďalšia további suplimentară lanjut lanjutan ek daha fazla дополнительная додаткова
    допълнителна περαιτέρω נוספת إضافية أخرى بیشتر برای daftar altri
    see voir véase vease ver vedi veja zie se siehe zobacz viz pozri lásd vezi bakınız lihat katso glej vidi
    види см див гл вижте δες δείτε ראו انظر हे पहा
    अतिरिक्त pour otras otros outras اقرأ texts selected explanatory
    articles artículos artigos voci pages topics статьи статті szócikkek članki
    works שוליים جات
    and und et e y i и і ve és og en och ja a dan και"""
# Scripts written without spaces between words: CJK titles ending in an end-matter word (or
# starting with "reference"), and Thai, Indic, Vietnamese words and phrases anywhere in a title.
_CJK_END = r"""书目 書目 阅读 閱讀 文献 文獻 链接 鏈接 連結 连结 链结 网址 網址 注释 註釋 注釋 注解 註解 脚注 腳註 注脚
    註腳 註記 注記 附注 附註 注釈 出典 参见 參見 参看 參看 另见 另見 相关条目 相關條目 関連項目 関連文献 関連書籍
    リンク 링크 문헌 각주 주석 출처 읽을거리 읽어보기 같이\ 보기 함께\ 보기 참고\ 자료"""
_CJK_START = r"参考 參考 参照 참고"
_INFIX = r"""อ้างอิง เชิงอรรถ แหล่งข้อมูลอื่น ดูเพิ่ม บรรณานุกรม อ่านเพิ่ม ลิงก์ภายนอก
    सन्दर्भ संदर्भ टिप्पणि टिप्पणी कड़ियाँ कडियाँ ग्रंथसूची ग्रन्थसूची ग्रंथसाहित्य ग्रन्थसाहित्य भी\ देखें बाह्य\ दुवे
    তথ্যসূত্র পাদটীকা বহিঃসংযোগ গ্রন্থপঞ্জি আরও\ দেখুন மேற்கோள் வெளி\ இணைப்பு
    మూలాలు బయటి\ లంకెలు ಉಲ್ಲೇಖ ಸಂಪರ್ಕ ನೋಡಿ അവലംബം പുറത്തേക്കുള്ള\ കണ്ണികൾ સંદર્ભ બાહ્ય\ કડીઓ ਹਵਾਲੇ ਬਾਹਰੀ\ ਕੜੀਆਂ
    tham\ khảo liên\ kết\ ngoài xem\ thêm chú\ thích ghi\ chú đọc\ thêm"""


def _words(alternatives: str) -> str:
    return "|".join(normalize(w) for w in re.split(r"(?<!\\)\s+", alternatives.strip()))


_TOKEN_RE = re.compile(
    rf"(?P<head>{_words(_HEAD)}|{_HEAD_AR})|(?P<weak>{_words(_WEAK)})|(?P<reading>{_words(_READING)})|"
    rf"(?P<qualifier>{_words(_QUALIFIER)})"
)
_SPLIT_RE = re.compile(r"[\s,;/&+·・、()\[\]\-–—:.!?]+")
_CJK_ENDS = tuple(normalize(w).replace("\\ ", " ") for w in re.split(r"(?<!\\)\s+", _CJK_END.strip()))
_CJK_STARTS = tuple(normalize(w) for w in _CJK_START.split())
_INFIX_RE = re.compile(_words(_INFIX).replace(r"\ ", " "))

# Rule 3: the marks of a citation in a line of raw wikitext: ISBN, ISSN, DOI, PMID, OCLC, a URL,
# a citation template. Every branch starts with a literal and none with a common letter, so `re`
# skips to those characters: 5.4 ms for the 1.5 MB of section bodies of tests/data/wiki and the
# sample, against 107 ms with branches such as `\bdoi\b`, `www\.` or `isbn` (they defeat the skip).
_CITATION_RE = re.compile(
    r"ISBN|ISSN|://|DOI|PMID|OCLC|\{\{(?:[Cc]it(?:e[ _]|ation\s*\||ar?[ _])|[Cc]ytuj|[Oo]uvrage\s*\||"
    r"[Ll]ien web|[Aa]rticle\s*\||[Ll]iteratur\s*\||[Кк]нига\s*\||[Сс]татья\s*\|)"
)
# Titles of a works list (content, module docstring): rule 3 leaves them alone. Folded as titles are.
_WORKS_RE = re.compile((
    r"\b(?:works?|books?|publications?|writings?|discograph\w*|filmograph\w*|videograph\w*|[oœ]e?uvres?|werke?|"
    r"werken|schriften|publikationen|veröffentlichungen|obras?|opere|dzieła|twórczość|publikacje|prace|díla|dílo|"
    r"művei|verk|værker|eserleri|yapıtları|karya|teokset|teoksia|сочинения|труды|произведения|публикации|книги|"
    r"твори|праці|публікації|έργα|ספרים|יצירות|مؤلفات|أعمال|آثار|कृतियाँ|रचनाएँ|tác phẩm)\b|作品|著作|著書|저서|작품"
).translate(_HAN_FOLD))
_YEAR_RE = re.compile(r"\b1[5-9]\d\d\b|\b20\d\d\b")
_NEUTRAL_RE = re.compile(r"[|!}]|\{\||\{\{|\[\[[^\]|:]*:")  # table and template lines, [[Category:..]], [[File:..]]
_CITATION_LINE = 200  # characters: a longer unbulleted line with a URL in it is a paragraph, not a citation
_PROSE = 150  # characters of prose lines that a citation list may hold (an intro: "Works on X:")

STRONG, WEAK, NONE = "strong", "weak", ""


@functools.lru_cache(maxsize=1 << 16)  # a wiki's headings repeat: History, Early life, Career, ...
def title_form(title: str) -> str:
    """STRONG if a normalized title is made of end-matter words (rule 2), WEAK if it names a
    reading list only on some wikis ("Literature") or the like, else NONE."""
    if title.endswith(_CJK_ENDS) or title.startswith(_CJK_STARTS) or _INFIX_RE.search(title):
        return STRONG
    kinds = set()
    for word in _SPLIT_RE.split(title):
        if word:
            match = _TOKEN_RE.fullmatch(word)
            if match is None:
                return NONE
            kinds.add(match.lastgroup)
    if "head" in kinds or ("reading" in kinds and "qualifier" in kinds):
        return STRONG
    return WEAK if "weak" in kinds else NONE


# A wiki without a line: every line's titles, but "Literatur" (dewiki's reading list) is
# compared as the weak word it is, by its body (the module docstring, rule 2).
_ANY = frozenset(t for titles in END_MATTER.values() for t in titles if title_form(t) != WEAK)


def body_is_end_matter(body: str, weak: bool = False, tail: bool = False) -> bool:
    """Rule 3 on a section's raw wikitext body: mostly citation lines and nearly no prose. With
    `weak` (a "Literature" title) a year marks a citation too; with `tail` (after end matter)
    a list without a prose line is enough."""
    if not (weak or tail) and _CITATION_RE.search(body) is None:  # nearly every prose section
        return False
    citations = items = prose_lines = prose = 0
    for line in body.split("\n"):
        line = line.strip()
        if not line:
            continue
        cited = _CITATION_RE.search(line) is not None or (weak and _YEAR_RE.search(line) is not None)
        if not cited and _NEUTRAL_RE.match(line):
            continue
        listed = line[0] in "*#:;"
        if cited and (listed or len(line) < _CITATION_LINE):
            citations += 1
        elif listed and len(line) < _CITATION_LINE:
            items += 1
        else:
            prose_lines += 1
            prose += len(line)
    if tail and prose_lines == 0 and citations + items:
        return True
    return citations > 0 and 2 * citations >= citations + items and prose <= _PROSE


def is_end_matter(title: str, lang: str, body: str | None = None, tail: bool = False) -> bool:
    """Whether a section is end matter on `lang`'s wiki, by its rendered heading title and, when
    given, its raw wikitext body (rules 1-3 of the module docstring). `tail`: a section before
    this one was end matter."""
    title = normalize(title)
    if title in END_MATTER.get(lang, _ANY):
        return True
    form = title_form(title)
    if form == STRONG:
        return True
    return body is not None and _WORKS_RE.search(title) is None and body_is_end_matter(body, form == WEAK, tail)
