"""The --validation-fraction a hint names holds a page out of each language that can spare one,
keeps pages to train on, and is the smallest that does; when none can, the hint says why."""

import pytest

from contract import holdout


@pytest.mark.parametrize("kept", range(2, 60))
def test_the_suggested_fraction_holds_out_a_page_and_keeps_the_rest_to_train(kept):
    fraction = holdout.fraction_for({"sw": kept})
    held = holdout.validation_pages(kept, fraction)
    assert 1 <= held < kept
    assert fraction <= 0.01 or holdout.validation_pages(kept, round(fraction - 0.01, 2)) == 0  # the smallest one


def test_two_pages_need_a_quarter_and_the_hint_names_it():
    """The bundled sample's 2-page languages: a fixed 0.05 held out nothing of them."""
    assert holdout.validation_pages(2, 0.05) == 0
    assert holdout.fraction_for({"ko": 2, "sw": 2}) == 0.25
    assert holdout.hint({"ko": 2, "sw": 2}) == ("canine preprocess --validation-fraction 0.25 holds out a page of "
                                                "each language")


def test_a_single_page_is_never_suggested_away():
    """0.5 holds out the one page of a 1-page language and leaves nothing to train on: a run with
    it exits 2. The hint names the language instead, and still suggests what the others need."""
    assert holdout.validation_pages(1, 0.5) == 1
    assert holdout.fraction_for({"xx": 1}) is None
    assert holdout.hint({"xx": 1}) == ("xx has a single kept page, which cannot be both trained on and held out; "
                                       "preprocess more of its text")
    mixed = holdout.hint({"xx": 1, "sw": 10})
    assert mixed.startswith("canine preprocess --validation-fraction 0.05 holds out a page of each language; xx has")
    assert holdout.validation_pages(1, holdout.fraction_for({"xx": 1, "sw": 10})) == 0


def test_enough_pages_for_every_worker():
    assert holdout.fraction_for({"en": 100, "sw": 30}, at_least=8) == 0.06  # 6 + 2 (1.8 rounded); 0.05: 5 + 2
    assert sum(holdout.validation_pages(n, 0.06) for n in (100, 30)) == 8
    assert sum(holdout.validation_pages(n, 0.05) for n in (100, 30)) == 7
    assert holdout.fraction_for({"en": 4}, at_least=8) is None
    assert holdout.hint({"en": 4}, at_least=8) == ("no --validation-fraction holds out 8 of these 4 kept pages and "
                                                   "keeps pages to train on; preprocess more input")
