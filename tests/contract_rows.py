"""Contract rows written by hand, for the tests of the row rules (contract/rows.py) and the batch builder."""

from contract import schema


def contract_row(example_id, text, char_positions=(), subwords=(), replacements=(), sop=schema.SOP_NO_PAIR):
    """One contract row of `text` as one segment; subwords = (start, length, id, offset, action) tuples."""
    codepoints = [schema.CLS] + [ord(c) for c in text] + [schema.SEP]
    sub = list(zip(*subwords)) if subwords else [()] * 5
    return {
        "example_id": example_id, "lang": "en", "page_ids": [1],
        "codepoints": codepoints, "segment_ids": [0] * len(codepoints), "sop_label": sop,
        "char_mask_positions": list(char_positions),
        "subword_starts": list(sub[0]), "subword_lengths": list(sub[1]), "subword_ids": list(sub[2]),
        "subword_predict_offsets": list(sub[3]), "subword_actions": list(sub[4]),
        "subword_replacements": [ord(c) for c in replacements],
    }


def columns(*rows) -> dict:
    """Rows as a dict of columns, one of the forms the row rules and the batch builder take."""
    return {k: [r[k] for r in rows] for k in rows[0]}
