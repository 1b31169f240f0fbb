"""Which Beam runner runs the job, with which options. The job itself (pipeline/beam/job.py) is the
same on every runner; only these options differ.

    canine preprocess pipeline/sample/*.xml --output out/shards --workers 2                     # DirectRunner
    canine preprocess pipeline/sample/*.xml --output out/shards --runner DaskRunner --workers 4 # a LocalCluster for the run
    canine preprocess pipeline/sample/*.xml --output out/shards --runner DaskRunner \\
        -- --dask_client_address tcp://scheduler:8786                                          # a running Dask cluster

Two checks come before anything is written (pipeline/run.py calls both for a runner other than
the DirectRunner), on the runner `runner_of` finds however it was named: `--runner`, or Beam's
`--runner` among the options after `--` (a flags file's, infra/beam/dataflow.flags). `check_runner` makes a Pipeline of the runner's options once, so that Beam's
own check names a misspelled runner or a missing option. `check_launch` refuses a DataflowRunner
run that cannot work: an `--output` or input on this machine's disk (Dataflow's workers run on
Google Cloud machines and cannot reach it), a launch without network, and one without Google
credentials (Beam retries those with a traceback each, then goes on anonymously). Beam would otherwise
find the latter by waiting: checking the staging bucket retries for minutes, and staging the
job's files retries 7 times from 5 s, doubling (`apache_beam.utils.retry`), about 10 minutes,
before it fails.

`DaskRunner` is Beam's (apache_beam/runners/dask, Beam 2.77) with the gaps that break this job
filled in (pipeline/beam/dask_runner.py). Beam knows no runner of that short name, so it is mapped
to that module's class path. This module imports Beam only when options are built, and Dask
(with pipeline/beam/dask_runner.py) only when they name the DaskRunner: pipeline/run.py imports
this one and `canine inspect` stays light.
"""

import threading

# Short names Beam does not resolve itself -> the class path it imports.
RUNNER_PATHS = {"DaskRunner": "pipeline.beam.dask_runner.DaskRunner"}
# The DirectRunner with worker processes: Beam's, its workers started with SIGINT ignored.
DIRECT_PROCESSES = "pipeline.beam.direct_runner.DirectRunner"
# Where a Dataflow launch goes: its staging bucket (Cloud Storage, or the emulator that
# google-cloud-storage is pointed at by STORAGE_EMULATOR_HOST) and the Dataflow API
# (--dataflow_endpoint, default below).
STORAGE_ENDPOINT = "https://storage.googleapis.com"
DATAFLOW_ENDPOINT = "https://dataflow.googleapis.com"
# `canine preprocess --runner`'s default, the one runner run.py does not check.
DEFAULT_RUNNER = "DirectRunner"


def runner_of(runner: str, beam_args=()) -> str:
    """The runner a run gets, however it is named: `--runner` of `canine preprocess`, or Beam's own
    `--runner` among the options after `--` (infra/beam/dataflow.flags passes it there, and the
    scheduled script hands that file on), read by Beam's parser as the job will read it. The checks
    (check_launch, check_runner) and the job then see one runner. Raises ValueError when both name
    one and they differ."""
    if not any(str(a).startswith("--") for a in beam_args):
        return runner
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

    named = PipelineOptions(list(beam_args)).view_as(StandardOptions).runner
    if not named or named == runner:
        return runner
    if runner != DEFAULT_RUNNER:
        raise ValueError(f"--runner {runner}: the Beam options after `--` name another runner ({named}); "
                         "name the runner once, as --runner or after `--`")
    return named


def beam_options(workers: int, runner: str, extra_args=()):
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

    path = RUNNER_PATHS.get(runner, runner)
    if runner == "DirectRunner" and workers > 1:
        path = DIRECT_PROCESSES
    args = [f"--runner={path}", *extra_args]
    if runner == "DirectRunner":
        # Name the runner and the mode: recent Beam may otherwise pick Prism, which downloads a binary.
        mode = "multi_processing" if workers > 1 else "in_memory"
        args += [f"--direct_num_workers={workers}", f"--direct_running_mode={mode}"]
    elif path == RUNNER_PATHS["DaskRunner"]:
        # Defines LocalClusterOptions: Beam's option parser then knows --dask_local_workers.
        import pipeline.beam.dask_runner  # noqa: F401

        args.append(f"--dask_local_workers={workers}")
    options = PipelineOptions(args)
    options.view_as(StandardOptions).runner = path  # runner_of's choice, also when the options after -- named it
    return options


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


def check_launch(runner: str, output: str, inputs=(), beam_args=(), timeout_s: float | None = None) -> None:
    """Refuse a DataflowRunner run whose --output or inputs are local paths, or whose endpoints
    (the Dataflow API, Cloud Storage) do not take a TCP connection within `timeout_s`
    (network.TIMEOUT_S), naming the host and what failed, or for which google-auth finds no
    credentials; nothing for other runners. Options
    Beam requires (--project, --temp_location) are left to Beam's own check, which names them:
    without them there is nothing to launch. Raises ValueError."""
    import os

    if not runner.endswith("DataflowRunner"):
        return
    from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions

    from pipeline.sources import network

    gcp = PipelineOptions(list(beam_args)).view_as(GoogleCloudOptions)
    if not gcp.project or not (gcp.temp_location or gcp.staging_location):
        return
    if _local(output):
        raise ValueError(f"--output {output}: a path on this machine, which Dataflow's workers (Google Cloud machines) "
                         "cannot write; give a gs:// URL, e.g. --output gs://BUCKET/shards")
    for path in inputs:
        if _local(path):
            raise ValueError(f"{path}: an input on this machine, which Dataflow's workers cannot read; copy it to a "
                             "bucket (gcloud storage cp) and give its gs:// URL")
    timeout_s = network.TIMEOUT_S if timeout_s is None else timeout_s
    storage = os.environ.get("STORAGE_EMULATOR_HOST") or STORAGE_ENDPOINT
    for url, what in ((gcp.dataflow_endpoint or DATAFLOW_ENDPOINT, "the Dataflow API, which the job is submitted to"),
                      (storage, "Cloud Storage, where the job's files are staged")):
        with network.waiting(f"{network.where(None, url)}, {what}", timeout_s):
            failed = network.connect(url, timeout_s)
        if failed is not None:
            where, why = failed
            raise ValueError(f"--runner {runner}: cannot reach {where} ({why}): {what}; check the network (and "
                             "HTTPS_PROXY if this machine needs a proxy), then run the same command again")
    missing = _no_credentials(timeout_s)
    if missing:
        raise ValueError(f"--runner {runner}: no Google Cloud credentials on this machine ({missing}); set "
                         "GOOGLE_APPLICATION_CREDENTIALS to a service account key file or run `gcloud auth "
                         "application-default login`, then run the same command again")


def _no_credentials(timeout_s: float) -> str | None:
    """Why google-auth finds no Application Default Credentials, or None when it finds them. Beam
    looks for them itself at launch, 5 times from 2 s, doubling, each failure logged with its
    traceback, then goes on anonymously into staging retries of about 10 minutes
    (apache_beam/internal/gcp/auth.py, Beam 2.77): asked here once, before the output's lock, in
    at most `timeout_s` (a thread left behind if the metadata server's probe hangs)."""
    try:
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError
    except ImportError:  # Beam's [gcp] extra missing: check_runner names it in Beam's own words
        return None
    found: list = []

    def look():
        try:
            google.auth.default()
            found.append(None)
        except DefaultCredentialsError as e:
            found.append(" ".join(str(e).split()).split(". ")[0].rstrip("."))
        except Exception as e:  # noqa: BLE001 - a bad key file, say: named
            found.append(f"{type(e).__name__}: {e}")

    thread = threading.Thread(target=look, name="google-auth default credentials", daemon=True)
    thread.start()
    thread.join(timeout_s)
    return found[0] if found else f"google-auth did not answer in {timeout_s:.0f} s"


def _local(path: str) -> bool:
    """A path only this machine can open: no protocol, or file://, local://, memory:// (one process's)."""
    last = str(path).rsplit("::", 1)[-1]  # a chained URL (simplecache::gs://...) reads from its last part
    return "://" not in last or last.split("://", 1)[0] in ("file", "local", "memory")


def check_runner(workers: int, runner: str, beam_args=()) -> None:
    """Beam checks the runner's name and its options (Dataflow's --project, --region, ...) when a
    Pipeline is made: made here once, so that a mistake is named before anything is written.
    Raises ValueError."""
    import logging
    import shutil

    import apache_beam as beam

    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.WARNING)  # its INFO lines ("Runner defaulting to ...") come again with the real one
    try:
        made = beam.Pipeline(options=beam_options(workers, runner, list(beam_args)))
        # A Pipeline makes its local temp dir once its options pass, and removes it only when it
        # runs: this one never does (each DaskRunner or Dataflow run left one in /tmp).
        shutil.rmtree(made.local_tempdir, ignore_errors=True)
    except ValueError as e:
        text = " ".join(str(e).split())
        if "validation" in text:  # "Pipeline has validations errors: Missing required option: project. ..."
            text += " Give the runner's options after a bare `--`: canine preprocess ... -- --project P --region R ..."
        raise ValueError(f"--runner {runner}: {text}") from None
    except ImportError as e:  # Beam's own words: "Google Cloud Dataflow runner not available, please install ..."
        raise ValueError(f"--runner {runner}: {e}") from None
    finally:
        root.setLevel(level)
