"""The pip command a hint prints for a missing optional extra, in one place for both sides
(pipeline/ and training/ import it; jobs/ too).

canine-pretrain is published on no package index, so `pip install 'canine-pretrain[hf]'` fails
("no matching distribution") however the extra is spelled. What works anywhere is installing the
extra's own requirements, pinned as pyproject.toml's [project.optional-dependencies] lists them;
they are read from the installed distribution's metadata (`Requires-Dist: x; extra == "hf"`), so
the pins are written once. Without that metadata (the code run from a checkout that was never
installed) the hint names the checkout's own form.
"""

import re
from importlib import metadata

DIST = "canine-pretrain"


def requirements(extra: str) -> list[str]:
    """The requirements the installed canine-pretrain lists for `extra`, [] if it is not installed
    or has no such extra."""
    try:
        listed = metadata.requires(DIST) or []
    except metadata.PackageNotFoundError:
        return []
    marker = re.compile(rf"""\bextra\s*==\s*["']{re.escape(extra)}["']""")
    return [req.partition(";")[0].strip() for req in listed
            if marker.search(req.partition(";")[2]) and not req.startswith(DIST)]  # [test] lists the others by name


def install_hint(extra: str) -> str:
    """`pip install 'x==1' 'y==2'`: a command that installs `extra` into the running interpreter."""
    reqs = requirements(extra)
    if reqs:
        return "pip install " + " ".join(f"'{req}'" for req in reqs)
    return f"pip install -e '.[{extra}]' in the project's checkout"


def project_hint(extra: str) -> str:
    """How to install the project itself with `extra` where it is not installed (another
    interpreter): from a checkout, or a wheel built from one (`pip wheel --no-deps -w dist .`)."""
    try:
        version = metadata.version(DIST)
    except metadata.PackageNotFoundError:
        version = "<version>"
    return (f"pip install -e '.[{extra}]' in a checkout, or a wheel built there: "
            f"pip install 'dist/canine_pretrain-{version}-py3-none-any.whl[{extra}]'")


def version() -> str:
    """The installed canine-pretrain's version (`canine --version`, a traceback file's header)."""
    try:
        return metadata.version(DIST)
    except metadata.PackageNotFoundError:  # a checkout that was never installed
        return "unknown (not installed)"
