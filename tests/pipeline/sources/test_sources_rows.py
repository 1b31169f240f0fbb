"""pipeline/sources/rows.py, jsonl.py and parquet.py: rows of already-cleaned corpora as plain
pages with their line or row, the row's language over --lang, bad rows marked with a reason."""

import json

import pytest

from pipeline.sources import InputError, WorkItem, plan_work_items, read_pages


@pytest.mark.parametrize("kind", ["jsonl", "jsonl_gz", "parquet"])
def test_row_inputs_yield_their_rows_as_plain_pages(kind, input_variants, sample_pages, pages_as_rows, read_all):
    pages = read_all(plan_work_items([str(input_variants[kind])]))
    assert [{"id": p.page_id, "title": p.title, "text": p.text, "lang": p.lang} for p in pages] == pages_as_rows(sample_pages["en"])
    assert all(p.markup == "plain" and p.ns == 0 and p.error is None for p in pages)
    sep = "#" if kind == "parquet" else ":"
    assert pages[2].source == f"{input_variants[kind]}{sep}3"


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_language_precedence_for_rows(suffix, tmp_path, write_rows, read_all):
    rows = [{"id": 1, "title": "A", "text": "a", "lang": "fr"}, {"id": 2, "title": "B", "text": "b", "lang": None}]
    path = write_rows(rows, tmp_path / f"mixed{suffix}")
    pages = read_all(plan_work_items([str(path)], lang="de"))
    assert [p.lang for p in pages] == ["fr", "de"] and all(p.error is None for p in pages)
    unnamed = write_rows([{"id": 1, "title": "A", "text": "a"}], tmp_path / f"unnamed{suffix}")
    with pytest.raises(InputError, match=f"{unnamed}.*no language"):
        plan_work_items([str(unnamed)])
    assert [p.lang for p in read_all(plan_work_items([str(unnamed)], lang="de"))] == ["de"]


def test_parquet_without_required_columns_fails_at_plan_time(tmp_path, write_rows):
    path = write_rows([{"id": 1, "body": "x", "lang": "en"}], tmp_path / "x.parquet")
    with pytest.raises(InputError, match=r"x.parquet: missing column\(s\) text \(has id, body, lang\)"):
        plan_work_items([str(path)])


def test_malformed_rows_are_marked_with_their_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    lines = [
        {"id": 1, "title": "ok", "text": "fine", "lang": "en"},
        "{not json",
        {"id": "7a", "text": "x", "lang": "en"},
        {"id": 3, "title": "no text", "lang": "en"},
        [1, 2],
        {"id": 4, "text": 5, "lang": "en"},
        '{"id": 5, "text": "a \\ud800 b", "lang": "en"}',
    ]
    path.write_text("\n".join(l if isinstance(l, str) else json.dumps(l) for l in lines) + "\n\n")
    pages = list(read_pages(WorkItem(str(path), "jsonl", lang="en")))
    assert [(p.source.rsplit(":", 1)[1], p.error is None) for p in pages] == [
        ("1", True), ("2", False), ("3", False), ("4", False), ("5", False), ("6", False), ("7", False)
    ]
    assert [p.error for p in pages[1:]] == [
        "invalid JSON at line 2, column 2: Expecting property name enclosed in double quotes", "non-integer id '7a'",
        "missing text", "expected a JSON object at line 5, got list", "text is int, not a string",
        "text has a lone surrogate U+D800 at character 2",
    ]
