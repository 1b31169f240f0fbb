"""The settings of the uninterrupted reference run (conftest.py `reference_run`) that the
end-to-end, restart and multi-node tests compare their losses with, step by step: one run for all
of them, since each start of Ray Train is what costs the suite most."""

REFERENCE_STEPS = 30
REFERENCE_SETTINGS = {"train.max_steps": REFERENCE_STEPS, "checkpoint.every": 10, "checkpoint.keep": 2,
                      "train.eval_every": 15, "data.eval_examples": 32}


def reference_config(shards, output, **extra):
    """The tiny config of the reference run on `shards` into `output`, with `extra` overrides."""
    from training.train import config

    return config.load_config("tiny", {**REFERENCE_SETTINGS, "data.path": shards, "output": str(output), **extra})


def assert_same_losses(records, reference, rel=1e-6):
    """The runs logged the same steps, with losses within `rel` of the reference's."""
    assert [r["step"] for r in records] == [r["step"] for r in reference]
    for got, want in zip(records, reference):
        assert abs(got["loss"] - want["loss"]) <= rel * abs(want["loss"]), (got["step"], got["loss"], want["loss"])
