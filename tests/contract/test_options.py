"""contract/options.py: config fields that carry their help, and the one parser of settings given as text."""

import dataclasses

import pytest

from contract import options


@dataclasses.dataclass(frozen=True)
class Inner:
    rate: float = options.option(0.5, "a rate")
    kind: str = options.option("a", "a kind", choices=("a", "b"))


@dataclasses.dataclass(frozen=True)
class Outer:
    orders: tuple[int, ...] = options.option((), "n-gram orders")
    name: str | None = options.option(None, "a name")
    on: bool = options.option(False, "a switch", resumable=True)
    inner: Inner = options.option(factory=Inner, help="a section")


@dataclasses.dataclass(frozen=True)
class Spec:
    size: str = options.option("base", "a size")
    extra: dict = options.option(factory=dict, help="free-form, checked by its loader")


@dataclasses.dataclass(frozen=True)
class Marked:
    seq_len: int = options.option(8, "a length")
    seed: int = options.option(0, "a seed")
    fingerprints: tuple = options.option((), "filled in by the program", internal=True)
    spec: Spec = options.option(factory=Spec, help="a section with a free-form field")


@pytest.mark.parametrize("text, kind, expected", [
    ("[2,3]", tuple[int, ...], (2, 3)), ("2, 3", tuple[int, ...], (2, 3)), ("[]", tuple[int, ...], ()),
    ([2, "3"], tuple[int, ...], (2, 3)), ("(a.xml,b.xml)", tuple, ("a.xml", "b.xml")),
    ("yes", bool, True), ("0", bool, False), ("7", int, 7), (7.0, int, 7), ("1e-3", float, 1e-3),
    ("null", str | None, None), ("ko", str | None, "ko"), (3, str, "3"),
])
def test_coerce_types_text_by_the_field(text, kind, expected):
    assert options.coerce(text, kind, "k") == expected


@pytest.mark.parametrize("text, kind, message", [
    ("2.5", int, "k: expected int, got '2.5'"), ("nan", float, "k: expected a finite number, got 'nan'"),
    ("maybe", bool, "k: expected bool, got 'maybe'"), ("[2,x]", tuple[int, ...], "k[1]: expected int, got 'x'"),
    (True, int, "k: expected int, got True"), ({"a": 1}, str, "k: expected str"),
])
def test_coerce_names_where_and_what(text, kind, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        options.coerce(text, kind, "k")


def test_build_checks_keys_and_types_of_nested_sections():
    built = options.build(Outer, {"orders": "[2,3]", "inner": {"rate": "0.25"}}, "cfg")
    assert built == Outer(orders=(2, 3), inner=Inner(rate=0.25))
    with pytest.raises(ValueError, match=r"cfg\.inner: unknown key\(s\) \['rat'\]"):
        options.build(Outer, {"inner": {"rat": 1}}, "cfg")
    with pytest.raises(ValueError, match=r"cfg\.inner: expected a mapping, got 3"):
        options.build(Outer, {"inner": 3}, "cfg")


def test_field_lookup_choices_and_plain_data():
    owner, f = options.field_at(Outer, "inner.kind")
    assert owner is Inner and options.choices_of(f) == ("a", "b") and options.help_of(f) == "a kind"
    assert options.field_at(Outer, "inner.nothing") is None and options.field_at(Outer, "on.x") is None
    assert options.check_choices(Outer(inner=Inner(kind="c"))) == ["inner.kind must be one of a, b, got 'c'"]
    assert options.as_plain(Outer(orders=(2,))) == {"orders": [2], "name": None, "on": False,
                                                     "inner": {"rate": 0.5, "kind": "a"}}


def test_parse_settings_keeps_the_value_whole_and_refuses_a_pair_without_key():
    assert options.parse_settings(["a.b=x=y", "c= 1", "a.b=z"]) == {"a.b": "z", "c": " 1"}
    with pytest.raises(ValueError, match="expected KEY=VALUE"):
        options.parse_settings(["novalue"])


def test_keys_hide_internal_fields_and_walk_sections():
    assert options.keys(Marked) == ["seed", "seq_len", "spec.extra.KEY", "spec.size"]
    assert options.keys(Outer) == ["inner.kind", "inner.rate", "name", "on", "orders"]
    # An internal field is still a value of the config: it is hidden, not refused.
    assert options.settable(Marked, "fingerprints")
    assert options.build(Marked, {"fingerprints": "[a, b]"}, "m").fingerprints == ("a", "b")


@pytest.mark.parametrize("key, expected", [
    ("seq_len", True), ("spec.size", True), ("spec.extra.anything", True), ("spec.anything", True),
    ("spec", False), ("seq_len.x", False), ("sepc.size", False), ("nothing", False), ("inner.rate", False),
])
def test_settable_takes_values_not_sections(key, expected):
    assert options.settable(Marked, key) is expected


def test_an_unknown_key_gets_the_closest_known_one_and_the_list():
    known = options.keys(Marked)
    assert options.closest("seq_lne", known) == "seq_len"
    assert options.closest("spec.sise", known) == "spec.size"
    assert options.closest("sise", known) == "spec.size"  # by the last part
    assert options.closest("fingerprints", known) is None  # never an internal one
    assert options.unknown_keys("m", ["seq_lne"], known) == (
        "m: unknown key(s) ['seq_lne']; did you mean 'seq_len'? known: seed, seq_len, spec.extra.KEY, spec.size")
    assert options.unknown_keys("m", ["zzz"], known) == "m: unknown key(s) ['zzz']; known: seed, seq_len, " \
                                                        "spec.extra.KEY, spec.size"
    assert "did you mean 'seq_lne' -> 'seq_len', 'sede' -> 'seed'?" in options.unknown_keys("m", ["seq_lne", "sede"],
                                                                                            known)
    with pytest.raises(ValueError, match=r"m: unknown key\(s\) \['sede'\]; did you mean 'seed'\? known: seed, seq_len, "
                                         r"spec$"):
        options.build(Marked, {"sede": 1}, "m")
