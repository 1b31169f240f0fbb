"""Shared by the model and engine tests: import the names you use."""

import pytest
import torch

from contract import schema

# The overrides that make a tiny config what resolve() leaves a CPU run (the engine takes no "auto").
CPU = {"parallel.device": "cpu", "parallel.precision": "fp32"}


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny tensors: on the shared 2-core machine a second torch thread made steps 35x slower
    (0.065 s -> 2.3 s for a tiny-model step, measured under load), so these tests use one."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def padded_inputs(L=133, lengths=(133, 70), seed=0):
    """(ids, attention_mask, token_type_ids) of len(lengths) examples: CLS first, zeros after
    each length, segment 1 from L // 2 on."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 0x3000, (len(lengths), L), generator=g)
    ids[:, 0] = schema.CLS
    mask = (torch.arange(L)[None] < torch.tensor(lengths)[:, None]).long()
    types = (torch.arange(L)[None] >= L // 2).long().expand(len(lengths), -1)
    return ids * mask, mask, types
