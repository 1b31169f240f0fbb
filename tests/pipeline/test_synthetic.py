"""The synthetic rows and shard directories (pipeline/synthetic.py): mask plans by the pipeline's own
rule (pipeline/rows/masks.py), rows and outputs that `canine validate` accepts."""

import numpy as np

from contract import schema
from contract.manifest import read_manifest
from pipeline.rows import masks
from pipeline.rows.examples import PackedExample
from pipeline.synthetic import synthetic_rows
from pipeline.output.validate import Problems, check_rows, validate


def test_contract_shards_are_a_valid_output(contract_shards):
    problems, count, summary = validate(contract_shards)
    assert count == 0, problems
    m = read_manifest(contract_shards)
    assert summary["examples"] == sum(s.rows for s in m.splits.values()) == sum(c.examples for c in m.languages.values())
    assert m.seq_len == 256 and len(m.splits["train"].shards) == 3


def test_synthetic_rows_are_planned_by_the_pipelines_rule():
    table = synthetic_rows(6, 300, seed=4, vocab_size=500, min_length=200)
    problems = Problems()
    check_rows(table, 300, None, "synthetic", problems)
    assert problems.items == []
    rows = table.to_pylist()
    assert all(200 <= len(r["codepoints"]) <= 300 for r in rows)
    assert [r["sop_label"] == schema.SOP_NO_PAIR for r in rows] == [True, False] * 3
    for r in rows:  # CANINE-C's plan is masks.py's for that example: seed 4, its page, part 0, copy 0
        ex = PackedExample(r["page_ids"], np.array(r["codepoints"], np.int32), np.array(r["segment_ids"], np.int8),
                           r["sop_label"], 0)
        assert masks.plan_example(ex, "xx", 0, 4, tokenizer=None)["char_mask_positions"].tolist() == r["char_mask_positions"]
    actions = np.concatenate([r["subword_actions"] for r in rows])
    assert set(actions.tolist()) == {schema.ACTION_MASK, schema.ACTION_RANDOM, schema.ACTION_KEEP}
    assert max(max(r["subword_ids"]) for r in rows) < 500
    assert table.equals(synthetic_rows(6, 300, seed=4, vocab_size=500, min_length=200))
    assert not table.equals(synthetic_rows(6, 300, seed=5, vocab_size=500, min_length=200))
