"""Regenerate the bundled sample dumps from the hand-written sources in `source/*.yaml`.

    python pipeline/sample/generate.py        # rewrites pipeline/sample/*wiki-*-pages-articles.xml

Each source holds one language's hand-written wikitext: section paragraphs for cities and
people with `$slots` (string.Template), whole articles, non-article pages and redirects. The
generator fills the slots from seeded random numbers, adds the markup that every article of a
kind carries (infobox, refs, file link, population table, lists, categories, interlanguage
links) and writes a MediaWiki export (format 0.11). Output is deterministic: same sources, same
bytes. `<U+XXXX>` in a source stands for that character, so decomposed accents, Hangul jamo
and private-use characters survive editors that normalize text.
"""

import hashlib
import random
import re
import string
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import yaml

HERE = Path(__file__).resolve().parent
DATE = "20261101"
TIMESTAMP = "2026-10-{day:02d}T{hour:02d}:{minute:02d}:00Z"
EXPORT_NS = "http://www.mediawiki.org/xml/export-0.11/"
NAMESPACE_KEYS = (-2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
LONG_CITIES, LONG_PEOPLE = 10, 6  # the rest of each list become stubs


def main() -> None:
    for source in sorted((HERE / "source").glob("*.yaml")):
        spec = yaml.safe_load(source.read_text(encoding="utf-8"))
        out = HERE / f"{spec['lang']}wiki-{DATE}-pages-articles.xml"
        out.write_text(render_dump(spec, build_pages(spec)), encoding="utf-8")
        print(f"{out.name}: {out.stat().st_size} bytes")


def chars(text: str) -> str:
    return re.sub(r"<U\+([0-9A-F]{4,6})>", lambda m: chr(int(m.group(1), 16)), text)


def build_pages(spec: dict) -> list[dict]:
    """Every page of one language as dicts: title, ns, id (str: may be malformed), text, redirect."""
    rng = random.Random(spec["lang"])
    words, pages = spec["words"], []
    people = [p["name"] for p in spec["people"]]
    cities = [c["name"] for c in spec["cities"]]
    for i, city in enumerate(spec["cities"]):
        slots = city_slots(rng, spec, city, cities, people)
        pages.append(article(spec, "city", slots, long=i < LONG_CITIES, rng=rng))
    for i, person in enumerate(spec["people"]):
        slots = person_slots(rng, spec, person, cities, people)
        pages.append(article(spec, "person", slots, long=i < LONG_PEOPLE, rng=rng))
    for page in spec["articles"]:
        pages.append({"title": page["title"], "ns": 0, "text": page["text"]})
    for page in spec["specials"]:
        pages.append({"title": page["title"], "ns": page["ns"], "text": page["text"]})
    for alias, target, *element in spec["redirects"]:
        keyword = element[1] if len(element) > 1 else words["redirect"]
        page = {"title": alias, "ns": 0, "text": f"{keyword} [[{target}]]\n"}
        if not element or element[0]:  # [alias, target, false] leaves out <redirect/>, like old dumps
            page["redirect"] = target
        pages.append(page)
    first = spec["first_id"]
    for offset, page in enumerate(pages):
        page["id"] = str(first + offset * 7)
        page["text"] = chars(page["text"])
    for bad in spec["malformed"]:  # copies of a stub with a broken field, exercising rejects/
        page = dict(pages[LONG_CITIES], title=bad["title"], id=bad.get("id", str(first - 1)))
        if bad.get("deleted_text"):
            page["text"] = None
        pages.append(page)
    return pages


def city_slots(rng, spec, city, cities, people) -> dict:
    founded = rng.randrange(880, 1720)
    return dict(
        city,
        slug=city["name"].replace(" ", "_"),
        founded=founded,
        pop=group(rng.randrange(20_000, 2_400_000), spec["thousands"]),
        pop_year=rng.randrange(2019, 2025),
        area=rng.randrange(40, 900),
        elev=rng.randrange(5, 1400),
        dist=rng.randrange(15, 480),
        twin=rng.choice([c for c in cities if c != city["name"]]),
        person=rng.choice(people),
        charter=founded + rng.randrange(40, 260),
        rail=rng.randrange(1838, 1910),
    )


def person_slots(rng, spec, person, cities, people) -> dict:
    born = rng.randrange(1760, 1930)
    died = born + rng.randrange(48, 94)
    return dict(
        person,
        slug=person["name"].replace(" ", "_"),
        born=born,
        died=died,
        age=died - born,
        birthplace=rng.choice(cities),
        city=rng.choice(cities),
        teacher=rng.choice([p for p in people if p != person["name"]]),
        debut=born + rng.randrange(19, 30),
        award_year=born + rng.randrange(35, 45),
    )


def group(number: int, sep: str) -> str:
    return f"{number:,}".replace(",", sep)


def fill(text: str, slots: dict) -> str:
    return string.Template(text).substitute(slots).strip()


def article(spec: dict, kind: str, slots: dict, long: bool, rng: random.Random) -> dict:
    """One city or person article: the infobox, the lead, then (long) every section or (stub) one."""
    words, name = spec["words"], slots["name"]
    sections = spec[kind]
    parts = [fill(words[f"infobox_{kind}"], slots)]
    lead = rng.choice(sections[0]["variants"])
    parts.append(fill(lead, slots) + cite(spec, slots, 1))
    if long:
        parts.append(fill(words[f"{kind}_file"], slots))
        for n, section in enumerate(sections[1:], start=2):
            parts.append(f"== {section['heading']} ==")
            parts += [fill(v, slots) + cite(spec, slots, n) for v in section["variants"]]
            if section.get("extra"):
                parts.append(extra(spec, section["extra"], slots, rng))
        see_also = [slots["twin"], slots["person"]] if kind == "city" else [slots["teacher"], slots["birthplace"]]
        parts.append(f"== {words['see_also']} ==\n" + "\n".join(f"* [[{t}]]" for t in see_also))
        parts.append(f"== {words['references']} ==\n{words['reflist']}")
        parts.append(f"== {words['external_links']} ==\n" + fill(words["official_site"], slots))
    else:
        section = sections[1]
        parts.append(fill(section["variants"][0], slots))
        parts.append(words["stub"])
    parts.append(fill(words[f"category_{kind}"], slots))
    parts.append("\n".join(f"[[{code}:{name}]]" for code in spec["interlanguage"]))
    if long and rng.random() < 0.3:
        parts.insert(1, "__NOTOC__")
    return {"title": name, "ns": 0, "text": "\n\n".join(parts) + "\n"}


def cite(spec: dict, slots: dict, n: int) -> str:
    """A <ref> on every other paragraph: full citation the first time, then reuse by name."""
    if n % 2:
        return ""
    slug = re.sub(r"\W+", "_", slots["name"]).strip("_")
    title = fill(spec["words"]["cite_title"], slots)
    return f'<ref name="s{n}">{{{{{spec["words"]["cite"]} |url=https://example.org/{spec["lang"]}/{slug}/{n} |title={title} |date=2026-{n:02d}-01}}}}</ref>'


def extra(spec: dict, what: str, slots: dict, rng: random.Random) -> str:
    words = spec["words"]
    if what == "population_table":
        year, pop, rows = slots["founded"] // 100 * 100 + 300, rng.randrange(4_000, 30_000), []
        while len(rows) < 6:
            year, pop = max(year + rng.randrange(40, 90), 1800), pop * rng.randrange(130, 240) // 100
            if year > 2020:
                break
            rows.append(f"|-\n| {year} || {group(pop, spec['thousands'])}")
        head = f"{{| class=\"wikitable\"\n|+ {fill(words['table_caption'], slots)}\n! {words['year']} !! {words['population']}\n"
        return head + "\n".join(rows) + "\n|}"
    if what == "works_list":
        years = sorted(rng.sample(range(slots["debut"], slots["died"]), 4))
        titles = [slots["work"], slots["work2"], slots["work3"], slots["work4"]]
        return "\n".join(f"# ''[[{t}]]'' ({y})" if i == 0 else f"# ''{t}'' ({y})" for i, (t, y) in enumerate(zip(titles, years)))
    raise ValueError(f"unknown extra {what!r}")


def base36(digest: bytes) -> str:
    n, out = int.from_bytes(digest, "big"), ""
    while n:
        n, r = divmod(n, 36)
        out = "0123456789abcdefghijklmnopqrstuvwxyz"[r] + out
    return out.rjust(31, "0")


def render_dump(spec: dict, pages: list[dict]) -> str:
    lang, names = spec["lang"], dict(zip(NAMESPACE_KEYS, spec["namespaces"]))
    ns_lines = "\n".join(
        f'      <namespace key="{k}" case="first-letter" />' if not names[k] else
        f'      <namespace key="{k}" case="first-letter">{escape(names[k])}</namespace>'
        for k in NAMESPACE_KEYS
    )
    head = (
        f'<mediawiki xmlns="{EXPORT_NS}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        f'xsi:schemaLocation="{EXPORT_NS} http://www.mediawiki.org/xml/export-0.11.xsd" version="0.11" xml:lang="{lang}">\n'
        f"  <siteinfo>\n    <sitename>{escape(spec['sitename'])}</sitename>\n    <dbname>{lang}wiki</dbname>\n"
        f"    <base>{escape(spec['base'])}</base>\n    <generator>MediaWiki 1.46.0-wmf.3</generator>\n"
        f"    <case>first-letter</case>\n    <namespaces>\n{ns_lines}\n    </namespaces>\n  </siteinfo>\n"
    )
    return head + "".join(render_page(spec, page, i) for i, page in enumerate(pages)) + "</mediawiki>\n"


def render_page(spec: dict, page: dict, i: int) -> str:
    rev = 120_000_000 + int(hashlib.sha1(f"{spec['lang']}{page['title']}".encode()).hexdigest()[:6], 16)
    user = spec["editors"][i % len(spec["editors"])]
    redirect = f"    <redirect title={quoteattr(page['redirect'])} />\n" if page.get("redirect") else ""
    if page["text"] is None:
        text = '      <text bytes="0" deleted="deleted" />\n      <sha1 />\n'
    else:
        data = page["text"].encode("utf-8")
        sha1 = base36(hashlib.sha1(data).digest())
        text = f'      <text bytes="{len(data)}" sha1="{sha1}" xml:space="preserve">{escape(page["text"])}</text>\n      <sha1>{sha1}</sha1>\n'
    stamp = TIMESTAMP.format(day=1 + i % 28, hour=i % 24, minute=(i * 7) % 60)
    return (
        f"  <page>\n    <title>{escape(page['title'])}</title>\n    <ns>{page['ns']}</ns>\n    <id>{page['id']}</id>\n{redirect}"
        f"    <revision>\n      <id>{rev}</id>\n      <parentid>{rev - 1 - i}</parentid>\n      <timestamp>{stamp}</timestamp>\n"
        f"      <contributor>\n        <username>{escape(user)}</username>\n        <id>{1000 + i % 9}</id>\n      </contributor>\n"
        f"      <comment>{escape(spec['comment'])}</comment>\n      <origin>{rev}</origin>\n      <model>wikitext</model>\n"
        f"      <format>text/x-wiki</format>\n{text}    </revision>\n  </page>\n"
    )


if __name__ == "__main__":
    main()
