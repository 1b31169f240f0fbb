"""`canine preprocess --dump A --dump B` says each dump beside its own flag: the
dumps are resolved in language order (the output path's), the flags come in any order."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "pipeline" / "sample"


def test_dump_dates_are_said_beside_their_own_flags(tmp_path, make_multistream, capsys):
    """Flags out of language order: each --dump line names that flag's own wiki and date."""
    from jobs.cli import main

    mirror = tmp_path / "mirror"
    make_multistream(SAMPLE / "kowiki-20261101-pages-articles.xml", mirror / "kowiki" / "20261101")
    en = tmp_path / "enwiki-20261020-pages-articles.xml"
    en.write_bytes((SAMPLE / "enwiki-20261101-pages-articles.xml").read_bytes())
    make_multistream(en, mirror / "enwiki" / "20261020")
    out = tmp_path / "out"
    # The misspelt runner stops the run after these lines, before any Beam work.
    assert main(["preprocess", "--dump", "ko:20261101", "--dump", "en:20261020", "--mirror", str(mirror),
                 "--output", str(out), "--runner", "NoSuchRunner"]) == 2
    err = capsys.readouterr().err.splitlines()
    ko = next(line for line in err if "--dump ko:" in line)
    en = next(line for line in err if "--dump en:" in line)
    assert ko.startswith("canine preprocess: --dump ko:20261101: kowiki 20261101 ("), err
    assert en.startswith("canine preprocess: --dump en:20261020: enwiki 20261020 ("), err
