"""Which Beam runner runs the job, with which options. The job itself (pipeline/job.py) is the
same on every runner; only these options differ.

    canine preprocess pipeline/sample/*.xml --output out/shards --workers 2                     # DirectRunner
    canine preprocess pipeline/sample/*.xml --output out/shards --runner DaskRunner --workers 4 # a LocalCluster for the run
    canine preprocess pipeline/sample/*.xml --output out/shards --runner DaskRunner \\
        -- --dask_client_address tcp://scheduler:8786                                          # a running Dask cluster

`DaskRunner` is Beam's (apache_beam/runners/dask, Beam 2.77) with the gaps that break this job
filled in (pipeline/dask_runner.py). Beam knows no runner of that short name, so it is mapped
to that module's class path. This module imports Beam only when options are built, and Dask
(with pipeline/dask_runner.py) only when they name the DaskRunner: `pipeline.output` imports
this one and `canine inspect` stays light.
"""

# Short names Beam does not resolve itself -> the class path it imports.
RUNNER_PATHS = {"DaskRunner": "pipeline.dask_runner.DaskRunner"}


def beam_options(workers: int, runner: str, extra_args=()):
    from apache_beam.options.pipeline_options import PipelineOptions

    path = RUNNER_PATHS.get(runner, runner)
    args = [f"--runner={path}", *extra_args]
    if runner == "DirectRunner":
        # Name the runner and the mode: recent Beam may otherwise pick Prism, which downloads a binary.
        mode = "multi_processing" if workers > 1 else "in_memory"
        args += [f"--direct_num_workers={workers}", f"--direct_running_mode={mode}"]
    elif path == RUNNER_PATHS["DaskRunner"]:
        # Defines LocalClusterOptions: Beam's option parser then knows --dask_local_workers.
        import pipeline.dask_runner  # noqa: F401

        args.append(f"--dask_local_workers={workers}")
    return PipelineOptions(args)


def job_link(result, options) -> str | None:
    """The web page of a Dataflow job (its console), from the result `Pipeline.run()` returned;
    None on other runners."""
    from apache_beam.options.pipeline_options import GoogleCloudOptions, StandardOptions

    runner = options.view_as(StandardOptions).runner or ""
    job_id = getattr(result, "job_id", None)
    if not runner.endswith("DataflowRunner") or not callable(job_id) or not job_id():
        return None
    gcp = options.view_as(GoogleCloudOptions)
    return f"https://console.cloud.google.com/dataflow/jobs/{gcp.region}/{job_id()}?project={gcp.project}"
