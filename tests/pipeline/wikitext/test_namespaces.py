"""pipeline/sources/namespaces.py: File, Media and Category links are told by the dump's own namespace
names (its <siteinfo>) added to the hand list, which is all an input without <siteinfo> gets; a
link's prefix is compared as MediaWiki compares it."""

import unicodedata

import pytest

from pipeline.sources import plan_work_items, read_pages
from pipeline.sources.common import RawPage, SiteInfo
from pipeline.sources import namespaces
from pipeline.wikitext.clean import CleanOptions, clean_page
from pipeline.wikitext.render import hidden_link

# cswiki's names: Soubor (File) is in no hand list; Kategorie is (dewiki's).
CS = SiteInfo(((-2, "Média"), (6, "Soubor"), (14, "Kategorie")))
ARTICLE = (
    "Praha je hlavní město.\n"
    "[[Soubor:x.jpg|thumb|Pražský hrad]]\n"
    "[[soubor:Mapa_Prahy|náhled|Mapa]]\n"  # no file extension: only the namespace tells
    "[[Média:Hymna|poslech]] Hrad.\n"
    "[[Kategorie:Y]]\n[[KATEGORIE : Z]]"
)


def _dump(tmp_path, siteinfo: bool):
    header = (
        '<siteinfo><namespaces><namespace key="-2" case="first-letter">Média</namespace>'
        '<namespace key="6" case="first-letter">Soubor</namespace>'
        '<namespace key="14" case="first-letter">Kategorie</namespace></namespaces></siteinfo>'
    ) if siteinfo else ""
    path = tmp_path / f"cswiki-{'with' if siteinfo else 'without'}-pages-articles.xml"
    path.write_text(
        f'<mediawiki xml:lang="cs">{header}<page><title>Praha</title><ns>0</ns><id>1</id><revision>'
        f"<text>{ARTICLE}</text></revision></page></mediawiki>", encoding="utf-8")
    (item,) = plan_work_items([str(path)])
    (page,) = read_pages(item)
    return page


def test_a_dumps_own_names_drop_its_file_and_category_links(tmp_path):
    result = clean_page(_dump(tmp_path, siteinfo=True))
    assert result.text == "Praha je hlavní město.\nposlech Hrad."  # Média: a link to the file, shown by its label
    assert result.dropped == {"images": 2}  # categories are page metadata: not counted


def test_an_input_without_siteinfo_uses_the_hand_list(tmp_path):
    page = _dump(tmp_path, siteinfo=False)
    assert page.site is None
    result = clean_page(page)
    # Soubor is not in the hand list: x.jpg is still a file by its extension, Mapa_Prahy a link that
    # shows its text (a file's options with it); Kategorie and Média are in it.
    assert result.text == "Praha je hlavní město.\nnáhled|Mapa\nposlech Hrad."
    assert result.dropped == {"images": 1}


def test_siteinfo_names_are_added_to_the_hand_list_not_put_in_its_place():
    names = namespaces.of(CS)
    assert names.files >= namespaces.FALLBACK.files and names.categories >= namespaces.FALLBACK.categories
    assert namespaces.of(None) is namespaces.FALLBACK
    assert namespaces.of(SiteInfo(CS.namespaces)) is names  # one table per distinct site
    # zhwiki's siteinfo says File / Category; its aliases 图像 / 檔案 come from the hand list.
    zh = namespaces.of(SiteInfo(((-2, "Media"), (6, "File"), (14, "Category"))))
    assert [hidden_link(t, zh) for t in ("图像:a", "檔案:b", "Image:c", "Category:d")] == ["images", "images", "images", ""]


def test_media_links_are_shown_file_links_are_not():
    """Media (-2) is a plain link to the file; its localized names and aliases are in the hand list
    and come from a dump's <siteinfo>, as File's do."""
    for prefix in ("Media", "media", "Medium", "Média", "Медиа", "媒体", "媒體", "媒体文件", "メディア", "미디어"):
        assert hidden_link(f"{prefix}:Song.ogg") is None, prefix
    assert hidden_link("Datei:Song.ogg") == "images" and hidden_link("Lied:Song.ogg") == "images"  # by extension
    sk = namespaces.of(SiteInfo(((-2, "Médiá"), (6, "Súbor"))))  # names in no hand list, from a dump
    assert (hidden_link("Médiá:Song.ogg", sk), hidden_link("Súbor:Song.ogg", sk)) == (None, "images")
    assert hidden_link("Médiá:Song.ogg") == "images"  # without the dump's names: by the extension
    page = RawPage(page_id=1, title="T", ns=0, redirect=False, lang="zh", source="t",
                   text="聽[[媒體:Song.ogg|這段錄音]]。[[檔案:A.jpg|縮圖|說明]]")
    assert clean_page(page).text == "聽這段錄音。"


@pytest.mark.parametrize("prefix", [
    "Tập tin", "tập_tin", "TẬP TIN", " Tập__ tin ", "Ta\u0323\u0302p tin",  # any case, _ = space, runs of them, NFC
    "Tập\u00a0tin", "\u200eTập tin",  # other Unicode spaces, a bidi mark (MediaWikiTitleCodec removes them)
])
def test_a_prefix_is_compared_as_mediawiki_does(prefix):
    vi = namespaces.of(SiteInfo(((6, "Tập tin"), (14, "Thể loại"))))
    assert unicodedata.normalize("NFC", "Ta\u0323\u0302p") == "Tập"
    assert hidden_link(f"{prefix}:Bản đồ", vi) == "images"
    assert hidden_link(f":{prefix}:Bản đồ", vi) is None  # a leading colon: an inline link


def test_a_siteinfo_name_is_compared_in_the_same_form():
    sk = namespaces.of(SiteInfo(((6, "Súbor"),)))  # skwiki's File, in no hand list
    assert hidden_link("su\u0301BOR:Mapa", sk) == "images" and hidden_link("Súbor:Mapa") is None


def test_the_real_knwiki_excerpt_drops_its_categories_by_its_siteinfo(real_pages):
    """knwiki's Category is ವರ್ಗ, in no hand list: before siteinfo was read, its category links
    were lines of text (they follow the external links: kept with the end matter here)."""
    (article,) = [p for p in real_pages["knwiki-201806-excerpt.xml.bz2"] if p.ns == 0 and not p.redirect]
    assert (14, "ವರ್ಗ") in article.site.namespaces and "[[ವರ್ಗ:" in article.text
    cfg = CleanOptions(keep_end_matter=True)
    assert "ವರ್ಗ:" not in clean_page(article, cfg).text
    bare = RawPage(article.page_id, article.title, 0, False, article.text, article.lang, article.source)
    assert "ವರ್ಗ:" in clean_page(bare, cfg).text  # the hand list alone does not know it
