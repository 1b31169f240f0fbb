"""The first line of a local `canine pretrain`: the logical CPUs Ray gets, said as what they are."""

from training.train.run import local_cpus


def test_a_small_machine_is_not_said_to_have_more_cpus_than_it_has():
    # 2 workers of 1 CPU and 2 for the read tasks on a 2-core machine: 4 logical CPUs, on purpose
    assert local_cpus(2, 1.0, 2) == (4, "4 logical CPUs on 2 cores: 2 for the 2 training workers, 2 for reading the data")
    assert local_cpus(1, 1.0, 1) == (3, "3 logical CPUs on 1 core: 1 for the 1 training worker, 2 for reading the data")


def test_a_machine_with_enough_cores_is_said_as_it_is():
    assert local_cpus(2, 1.0, 16) == (16, "16 CPUs")
    # a fine-tuning run reads its files in the workers: no CPUs kept for reading
    assert local_cpus(3, 1.0, 2, reading=0) == (3, "3 logical CPUs on 2 cores: 3 for the 3 training workers")
    assert local_cpus(2, 1.0, 4) == (4, "4 CPUs")
