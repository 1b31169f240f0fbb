"""Config dataclass fields that carry their own help, choices and resume rule, and the one
type-driven parser of settings given as text (a YAML file, `--set KEY=VALUE`, a flag).

    seq_len: int = option(2048, "codepoints per example")
    objective: str = option("char", "CANINE-C or CANINE-S", choices=("char", "subword"))

Both configs use it (pipeline/preprocess_config.py's PreprocessConfig, training/train/schema.py's
PretrainConfig), and `jobs/flags.py` makes the command-line flags from the same fields, so a
default, a choice or a help text is written once. A leaf module: it imports nothing, not even
the rest of the contract.
"""

import dataclasses
import difflib
import math
import types
import typing


def option(default=dataclasses.MISSING, help: str = "", *, choices: tuple = (), resumable: bool = False,
           internal: bool = False, factory=dataclasses.MISSING):
    """A dataclass field with its help text; `choices` are the allowed values (checked by
    `check_choices`); `resumable`: a resumed run may change it (it alters nothing a step computes);
    `internal`: filled in by the program, or given by a command's own argument, rather than set by
    the user: still accepted, but left out of the keys that messages list and suggest (`keys`)."""
    metadata = {"help": help, "choices": tuple(choices), "resumable": resumable, "internal": internal}
    return dataclasses.field(default=default, default_factory=factory, metadata=metadata)


def help_of(f: dataclasses.Field) -> str:
    return f.metadata.get("help", "")


def choices_of(f: dataclasses.Field) -> tuple:
    return f.metadata.get("choices", ())


def is_internal(f: dataclasses.Field) -> bool:
    return f.metadata.get("internal", False)


def _items(text: str) -> list[str]:
    """'[2, 3]', '(2,3)', '2,3', '[]' -> ['2', '3'] / []."""
    text = text.strip()
    if text[:1] + text[-1:] in ("[]", "()"):
        text = text[1:-1]
    return [t.strip() for t in text.split(",") if t.strip()]


def coerce(value, kind, where: str):
    """`value` (from YAML, or text from the command line) as a value of the field type `kind`;
    a ValueError names `where` and what was expected. Types: bool, int, float (finite), str,
    tuple[T, ...], `X | None`, dict."""
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
    elif kind in (int, float):
        try:
            number = kind(value) if not isinstance(value, bool) else None
        except (TypeError, ValueError):
            number = None
        if number is not None and not math.isfinite(number):  # "nan", "inf": float() takes them
            # As typed, quoted as any other value: a flag's nan comes as a float, --set's as text.
            raise ValueError(f"{where}: expected a finite number, got {str(value)!r}")
        if number is not None and (kind is float or float(value) == number):
            return number
    elif kind is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
    elif kind is dict and isinstance(value, dict):
        return dict(value)
    elif typing.get_origin(kind) is tuple or kind is tuple:  # tuple[int, ...], or a bare tuple of str
        item = (typing.get_args(kind) or (str,))[0]
        if isinstance(value, str):
            value = _items(value)
        if isinstance(value, (list, tuple)):
            return tuple(coerce(v, item, f"{where}[{i}]") for i, v in enumerate(value))
    elif typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in typing.get_args(kind):
        if value is None or value == "null":
            return None
        (inner,) = [k for k in typing.get_args(kind) if k is not type(None)]
        return coerce(value, inner, where)
    name = getattr(kind, "__name__", None) or str(kind)
    raise ValueError(f"{where}: expected {name}, got {value!r}")


def hints(cls) -> dict:
    """Field name -> its type (annotations resolved)."""
    return typing.get_type_hints(cls)


def build(cls, values, where: str):
    """A (nested) config dataclass from a mapping; every key is checked against its fields and
    every value coerced to its field's type, errors naming `where.key`."""
    if not isinstance(values, dict):
        raise ValueError(f"{where}: expected a mapping, got {values!r}")
    types_ = hints(cls)
    unknown = sorted(set(values) - {f.name for f in dataclasses.fields(cls)})
    if unknown:
        raise ValueError(unknown_keys(where, unknown, [f.name for f in dataclasses.fields(cls) if not is_internal(f)]))
    kwargs = {}
    for name, value in values.items():
        kind = types_[name]
        if dataclasses.is_dataclass(kind):
            kwargs[name] = build(kind, value, f"{where}.{name}")
        else:
            kwargs[name] = coerce(value, kind, f"{where}.{name}")
    return cls(**kwargs)


def field_at(cls, dotted: str) -> tuple[type, dataclasses.Field] | None:
    """(the dataclass holding it, the field) of a dotted key such as 'optim.lr'; None if unknown."""
    *sections, last = dotted.split(".")
    for part in sections:
        kind = hints(cls).get(part)
        if not dataclasses.is_dataclass(kind):
            return None
        cls = kind
    found = {f.name: f for f in dataclasses.fields(cls)}.get(last)
    return (cls, found) if found else None


def settable(cls, dotted: str) -> bool:
    """Whether `dotted` names a value of the config: a field that is not a whole section, or a key
    below a section's free-form mapping field (model.FIELD of PretrainConfig: its loader checks it)."""
    *sections, last = dotted.split(".")
    for part in sections:
        kind = hints(cls).get(part)
        if kind is dict:  # model.overrides.FIELD
            return True
        if not dataclasses.is_dataclass(kind):
            return False
        cls = kind
    kind = hints(cls).get(last)
    if kind is not None:
        return not dataclasses.is_dataclass(kind)
    return bool(sections) and dict in hints(cls).values()  # model.FIELD


def keys(cls, prefix: str = "") -> list[str]:
    """The dotted keys a user sets (`--set KEY=VALUE`), sections walked, internal fields left out;
    a free-form mapping field shows as `FIELD.KEY`."""
    out = []
    for f in dataclasses.fields(cls):
        kind = hints(cls)[f.name]
        if is_internal(f):
            continue
        if dataclasses.is_dataclass(kind):
            out += keys(kind, f"{prefix}{f.name}.")
        else:
            out.append(f"{prefix}{f.name}" + (".KEY" if kind is dict else ""))
    return sorted(out)


def closest(key: str, known: list[str]) -> str | None:
    """The known key `key` was most likely meant to be: the one with the same last part in another
    section (train.lr -> optim.lr), else by the whole dotted key (trian.max_steps ->
    train.max_steps), else by its last part (max_step -> train.max_steps)."""
    leaves = {k.rsplit(".", 1)[-1]: k for k in reversed(known)}  # the first key of a shared last part wins
    if "." in key and key.rsplit(".", 1)[-1] in leaves:
        return leaves[key.rsplit(".", 1)[-1]]
    found = difflib.get_close_matches(key, known, n=1)
    if found:
        return found[0]
    found = difflib.get_close_matches(key.rsplit(".", 1)[-1], leaves, n=1)
    return leaves[found[0]] if found else None


def unknown_keys(where: str, unknown: list[str], known: list[str]) -> str:
    """The one message for keys a config does not have: a did-you-mean for each that is close to a
    known one, then every known key (internal ones were left out by the caller)."""
    guesses = [f"'{k}' -> '{g}'" if len(unknown) > 1 else f"'{g}'" for k in unknown if (g := closest(k, known))]
    hint = f"did you mean {', '.join(guesses)}? " if guesses else ""
    return f"{where}: unknown key(s) {sorted(unknown)}; {hint}known: {', '.join(sorted(known))}"


def check_choices(obj, where: str = "") -> list[str]:
    """Problems of every field (nested sections included) whose value is not one of its choices."""
    problems = []
    for f in dataclasses.fields(obj):
        value, key = getattr(obj, f.name), f"{where}{f.name}"
        if dataclasses.is_dataclass(value):
            problems += check_choices(value, key + ".")
        elif choices_of(f) and value not in choices_of(f):
            problems.append(f"{key} must be one of {', '.join(map(str, choices_of(f)))}, got {value!r}")
    return problems


def as_plain(obj):
    """A config as plain YAML/JSON data: nested dicts, tuples as lists."""
    if dataclasses.is_dataclass(obj):
        return {f.name: as_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {k: as_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [as_plain(v) for v in obj]
    return obj


def parse_settings(items: list[str], flag: str = "--set") -> dict[str, str]:
    """['optim.lr=1e-3', 'model.ngram_orders=[2,3]'] -> {'optim.lr': '1e-3', ...}; later ones win."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{flag} {item!r}: expected KEY=VALUE, e.g. optim.lr=1e-3")
        out[key.strip()] = value
    return out
