"""Command-line flags made from config dataclass fields (contract/options.py), and `--set`.

A flag's type, choices and help are its field's, so the CLI never restates a default or a
choice. Two kinds of commands use it:
- `canine preprocess`: flags default to the field's default (shown in --help);
- `canine pretrain`: flags default to nothing, so the --config preset decides; the help names
  the config key and the built-in default.
Every command with a config also takes `--set KEY=VALUE` for any field, lists included
(`--set model.ngram_orders=[2,3]`); `check_settings` refuses a key the config lacks before any
work, naming the closest key and listing the keys a user sets (internal fields left out), and a
value its field cannot take, naming `--set KEY`.
"""

import argparse
import types
import typing

from contract import options

# The namespace attribute that holds the config class whose fields the command's flags and `--set` are.
_CONFIG = "_set_config"
# set_defaults(**{CONFIG_BY: f}): f(args) is the config class of the parsed command (canine finetune's
# depends on its task), checked instead of the field flags' class.
CONFIG_BY = "_set_config_by"
# The namespace attribute that holds {flag dest: dotted field key} of the command's field flags.
_FLAGS = "_field_flags"


def _kind(kind):
    """The argparse `type` of a field type: int / float / str; None for bool and tuples."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        kind = next(k for k in typing.get_args(kind) if k is not type(None))
    return kind if kind in (int, float, str) else None


def _int_or_auto(text: str) -> int:
    """An int flag that also takes the word `auto`, which its field holds as 0."""
    return 0 if text.strip().lower() == "auto" else int(text)


_int_or_auto.__name__ = "int"  # argparse names the type in its errors: "invalid int value: 'x'"


def add_field_flags(parser, cls, flags: dict[str, str] | list[str], *, defaults: bool = True,
                    auto: tuple[str, ...] = ()) -> None:
    """One flag per entry of `flags` (flag dest -> dotted field key, or field names that are also
    the dests): `--seq-len` for `seq_len`. defaults=False: the flag's default is None (the config
    file decides) and its help names the key and the built-in default. `auto`: dests of int
    fields whose 0 means auto, so that the flag takes `auto` too (`--micro-batch auto`)."""
    pairs = flags.items() if isinstance(flags, dict) else [(name, name) for name in flags]
    # --set takes cls's keys, and each flag's value is checked as its field's (check_settings). A
    # group's defaults are its parser's: the flags of every call are kept.
    parser.set_defaults(**{_CONFIG: cls, _FLAGS: {**(parser.get_default(_FLAGS) or {}), **dict(pairs)}})
    for dest, key in pairs:
        found = options.field_at(cls, key)
        if found is None:
            raise KeyError(f"{cls.__name__} has no field {key!r}")
        owner, f = found
        kind = options.hints(owner)[f.name]
        help_text = options.help_of(f).replace("%", "%%")  # argparse formats help with %
        flag = "--" + dest.replace("_", "-")
        if kind is bool and defaults and f.default is False:
            parser.add_argument(flag, dest=dest, action="store_true", help=help_text)
            continue
        if kind is bool:
            parser.add_argument(flag, dest=dest, action=argparse.BooleanOptionalAction,
                                default=f.default if defaults else None, help=help_text)
            continue
        kwargs = {"dest": dest, "type": _int_or_auto if dest in auto else _kind(kind), "help": help_text}
        if options.choices_of(f):
            kwargs["choices"] = options.choices_of(f)
        if defaults:
            kwargs["default"] = f.default
        else:
            kwargs["help"] = f"{help_text} (default: the config's {key}; built in: {f.default!r})"
        parser.add_argument(flag, **kwargs)


def add_set_flag(parser, example: str) -> None:
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help=f"set any config field, lists too, e.g. {example} (repeatable, wins over the flags; an "
                             "unknown key is refused with the closest one and the keys there are; default: none)")


def values_of(args, flags: dict[str, str] | list[str]) -> dict:
    """{dotted key: value} of the flags that were given (not None)."""
    pairs = flags.items() if isinstance(flags, dict) else [(name, name) for name in flags]
    return {key: getattr(args, dest) for dest, key in pairs if getattr(args, dest, None) is not None}


def check_settings(args) -> None:
    """Refuse a value that a field flag's field cannot take (`--lr nan`), naming the flag as it
    was typed, and the `--set` keys that the command's config (the class of its field flags) does
    not have, with a did-you-mean and the keys it has. A command without field flags (`canine smoke`:
    the keys of two configs) leaves its --set to its own loader. The message names the flag, not
    the command, which jobs/errors.py puts before it: `canine pretrain: --set: unknown key(s) ...`."""
    cls = getattr(args, _CONFIG, None)
    if (by := getattr(args, CONFIG_BY, None)) is not None:  # a command whose config depends on an argument
        cls = by(args)
    if cls is None:
        return
    for dest, key in (getattr(args, _FLAGS, None) or {}).items():  # argparse took float("nan") as a float
        if getattr(args, dest, None) is not None and (found := options.field_at(cls, key)):
            options.coerce(getattr(args, dest), options.hints(found[0])[found[1].name], "--" + dest.replace("_", "-"))
    if not getattr(args, "set", None):
        return
    settings = options.parse_settings(args.set)
    unknown = [key for key in settings if not options.settable(cls, key)]
    if unknown:
        raise ValueError(options.unknown_keys("--set", unknown, options.keys(cls)))
    for key, value in settings.items():  # typed now, so an error names the flag as it was given
        if found := options.field_at(cls, key):
            options.coerce(value, options.hints(found[0])[found[1].name], f"--set {key}")
