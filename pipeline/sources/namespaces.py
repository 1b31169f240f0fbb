"""Which link prefixes name the File, Media and Category namespaces on a page's wiki.

[[File:x.jpg|thumb|caption]] embeds the file outside the sentence (dropped with its caption);
[[Media:x.ogg|label]] is a plain link to the file, shown as its label inside the sentence, and
without a label as any link is, by its target as written ("Media:x.ogg" on the rendered page).

Every MediaWiki XML dump states its own namespace names in its header
(`<siteinfo><namespaces><namespace key="6" case="first-letter">Datei</namespace>`);
pipeline/sources/mediawiki.py reads those the cleaner needs (File = 6, Media = -2, Category = 14)
into a `SiteInfo` that every page of the dump carries (RawPage.site).

The dump's names are added to the hand list below, not put in its place: a dump lists only each
namespace's one local name, not its aliases (dewiki's `Bild`, zhwiki's 图像 / 檔案), and the English
canonical names (File, Image, Media, Category) work on every wiki. The hand list was already applied
on every wiki, so adding to it never loses a prefix that matched before (a wiki it covers renders as
it did), and a wiki it does not cover (cswiki's Soubor / Kategorie) now has its own names. An input
without a <siteinfo> (an XML export without one; JSON Lines and Parquet rows are plain text and are
not rendered at all) gets the hand list alone: `of(None)`.

A link's prefix is compared as MediaWiki compares it (MediaWikiTitleCodec::splitTitleString,
Language::getNsIndex): bidi marks removed, each run of spaces, underscores and other Unicode spaces
one `_`, trimmed, and the whole name lower-cased, since namespace names are case-insensitive in
full (a namespace's `case="first-letter"` is about the titles in it, not its name); here NFC and
casefold, as MediaWiki's input is NFC.
"""

import functools
import re
import unicodedata
from dataclasses import dataclass

from pipeline.sources.common import SiteInfo

FILE_KEYS = frozenset({6})  # File: the file itself, shown outside the text
MEDIA_KEYS = frozenset({-2})  # Media: a link to the file, shown in the text
CATEGORY_KEYS = frozenset({14})

_BIDI = dict.fromkeys(map(ord, "\u200e\u200f\u202a\u202b\u202c\u202d\u202e"))  # removed, as MediaWiki does
_SPACES_RE = re.compile("[ _\xa0\u1680\u180e\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")


def key(name: str) -> str:
    """A namespace name (or a link's prefix) in the form compared: `Tập tin`, `tập_tin` -> `tập_tin`."""
    if not name.isascii():
        name = unicodedata.normalize("NFC", name.translate(_BIDI))
    return _SPACES_RE.sub("_", name).strip("_").casefold()


@dataclass(frozen=True)
class Namespaces:
    """The compared forms (`key`) of the prefixes that make a link a File, Media or Category link."""

    files: frozenset  # File (6) names and aliases
    categories: frozenset  # Category (14) names and aliases
    media: frozenset  # Media (-2) names and aliases


# The hand list: names and aliases of File, Category and Media on the larger wikis (Special:NamespaceInfo
# of each; Media from MediaWiki's languages/messages files), with the English canonical names, which
# work on every wiki.
FALLBACK = Namespaces(
    frozenset(map(key, (
        "File Image "  # en and every wiki's canonical names
        "Datei Bild Fichier Archivo Imagen Immagine Ficheiro Arquivo Imagem Bestand Afbeelding Plik Grafika Fil "
        "Dosya Berkas Tập_tin Hình Файл Изображение Зображення 文件 檔案 档案 图像 圖像 ファイル 画像 파일 그림 "
        "ملف صورة پرونده קובץ תמונה चित्र फ़ाइल ไฟล์ Αρχείο Εικόνα"
    ).split())),
    frozenset(map(key, (
        "Category Kategorie Catégorie Categoría Categoria Categorie Kategoria Kategori Thể_loại Категория "
        "Категорія 分类 分類 カテゴリ 분류 تصنيف رده קטגוריה श्रेणी หมวดหมู่ Κατηγορία"
    ).split())),
    frozenset(map(key, (
        "Media "  # every wiki's canonical name
        "Medium Média Mídia Медиа Медіа 媒体 媒體 媒体文件 媒体档案 メディア 미디어 ميديا מדיה Phương_tiện"
    ).split())),
)


@functools.lru_cache(maxsize=64)
def of(site: SiteInfo | None) -> Namespaces:
    """The prefixes of a page's wiki: its dump's own names added to the hand list (FALLBACK alone
    for None). One per distinct SiteInfo (the pages of a dump share theirs), so a page pays a dict
    look-up."""
    if site is None:
        return FALLBACK
    files = {key(name) for k, name in site.namespaces if k in FILE_KEYS}
    categories = {key(name) for k, name in site.namespaces if k in CATEGORY_KEYS}
    media = {key(name) for k, name in site.namespaces if k in MEDIA_KEYS}
    return Namespaces(FALLBACK.files | files, FALLBACK.categories | categories, FALLBACK.media | media)
