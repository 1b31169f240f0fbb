"""Which Beam runner runs the job, with which options. The job itself (pipeline/job.py) is the
same on every runner; only these options differ."""


def beam_options(workers: int, runner: str, extra_args=()):
    from apache_beam.options.pipeline_options import PipelineOptions

    args = [f"--runner={runner}", *extra_args]
    if runner == "DirectRunner":
        # Name the runner and the mode: recent Beam may otherwise pick Prism, which downloads a binary.
        mode = "multi_processing" if workers > 1 else "in_memory"
        args += [f"--direct_num_workers={workers}", f"--direct_running_mode={mode}"]
    return PipelineOptions(args)
