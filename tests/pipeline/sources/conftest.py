"""Helpers shared by the tests of pipeline/sources/, handed out as fixtures as tests/conftest.py
does (tests/ is not a package):
    fields(page)     everything of a RawPage but `source`, which names the file and so differs
                     between input kinds
    read_all(items)  every page of the work items, in order
"""

import pytest

from pipeline.sources import read_pages


def fields(page):
    return (page.page_id, page.title, page.ns, page.redirect, page.text, page.lang, page.error, page.markup)


def read_all(items):
    return [page for item in items for page in read_pages(item)]


@pytest.fixture(name="fields", scope="session")
def _fields_fixture():
    return fields


@pytest.fixture(name="read_all", scope="session")
def _read_all_fixture():
    return read_all
