"""Which Beam runner runs the job, with which options. The job itself (pipeline/beam/job.py) is the
same on every runner; only these options differ.

    canine preprocess pipeline/sample/*.xml --output out/shards --workers 2                     # DirectRunner
    canine preprocess pipeline/sample/*.xml --output out/shards --runner DaskRunner --workers 4 # a LocalCluster for the run
    canine preprocess pipeline/sample/*.xml --output out/shards --runner DaskRunner \\
        -- --dask_client_address tcp://scheduler:8786                                          # a running Dask cluster

Two checks come before anything is written (pipeline/run.py calls both for a runner other than
the DirectRunner), on the runner `runner_of` finds however it was named: `--runner`, or Beam's
`--runner` among the options after `--` (a flags file's, infra/beam/dataflow.flags), in any
spelling Beam takes (`dataflow` is the DataflowRunner); their refusals name it as it was typed.
`check_runner` makes a Pipeline of the runner's options once, so that Beam's
own check names a misspelled runner or a missing option. `check_launch` refuses a DataflowRunner
run that cannot work: an `--output`, input or dump `--mirror` on this machine's disk (Dataflow's workers run on
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
from typing import NamedTuple

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


class Named(NamedTuple):
    """A run's runner: `name`, as this module knows it (its class's short name: DataflowRunner),
    and `said`, as the user typed it, which messages name (`--runner=dataflow`, after `--`)."""
    name: str
    said: str


def canonical(name: str) -> str:
    """The short name of the runner Beam resolves `name` to: case-insensitively, `Runner`
    optional (apache_beam/runners/runner.py `create_runner`, Beam 2.77: `dataflow` is the
    DataflowRunner), this module's short names (RUNNER_PATHS) too; any other name as it is
    (check_runner has Beam name it)."""
    if name == DEFAULT_RUNNER:
        return name
    from apache_beam.options.pipeline_options import StandardOptions

    known = {n.lower(): n for n in (*StandardOptions.KNOWN_RUNNER_NAMES, *RUNNER_PATHS)}
    return known.get(name.lower(), known.get(name.lower() + "runner", name))


def runner_of(runner: str, beam_args=()) -> Named:
    """The runner a run gets, however it is named: `--runner` of `canine preprocess`, or Beam's own
    `--runner` among the options after `--` (infra/beam/dataflow.flags passes it there, and the
    scheduled script hands that file on), read by Beam's parser as the job will read it; in any
    spelling Beam takes (`--runner=dataflow`). The checks (check_launch, check_runner) and the job
    then see one runner, and name it as it was typed. Raises ValueError when both name one and
    they differ."""
    flag = Named(canonical(runner), f"--runner {runner}")
    if not any(str(a).startswith("--") for a in beam_args):
        return flag
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

    named = PipelineOptions(list(beam_args)).view_as(StandardOptions).runner
    if not named or canonical(named) == flag.name:
        return flag
    if runner != DEFAULT_RUNNER:
        raise ValueError(f"{flag.said}: the Beam options after `--` name another runner ({named}); "
                         "name the runner once, as --runner or after `--`")
    return Named(canonical(named), _typed_runner(beam_args))


def _typed_runner(beam_args) -> str:
    """Beam's `--runner` among `beam_args` as they hold it: `--runner=X` or `--runner X` (its
    parser reads both; the last one given wins)."""
    args, said = [str(a) for a in beam_args], ""
    for i, arg in enumerate(args):
        if arg.startswith("--runner="):
            said = arg
        elif arg == "--runner" and i + 1 < len(args):
            said = f"--runner {args[i + 1]}"
    return said


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


def check_launch(runner: str, output: str, inputs=(), beam_args=(), timeout_s: float | None = None, *,
                 said: str | None = None, mirror: str | None = None) -> None:
    """Refuse a DataflowRunner run whose --output, --mirror (of a --dump run) or inputs are local
    paths, or whose endpoints (the Dataflow API, Cloud Storage) do not take a TCP connection
    within `timeout_s` (network.TIMEOUT_S), naming the host and what failed, or for which
    google-auth finds no credentials; nothing for other runners. `said`: the runner as the user
    typed it (runner_of), which the refusals name. Options Beam requires (--project,
    --temp_location) are left to Beam's own check, which names them: without them there is
    nothing to launch. Raises ValueError."""
    import os

    if not runner.endswith("DataflowRunner"):
        return
    said = said or f"--runner {runner}"
    from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions

    from pipeline.sources import network

    gcp = PipelineOptions(list(beam_args)).view_as(GoogleCloudOptions)
    if not gcp.project or not (gcp.temp_location or gcp.staging_location):
        return
    if _local(output):
        raise ValueError(f"--output {output}: a path on this machine, which Dataflow's workers (Google Cloud machines) "
                         "cannot write; give a gs:// URL, e.g. --output gs://BUCKET/shards")
    if mirror is not None and _local(mirror):
        raise ValueError(f"--mirror {mirror}: a dump mirror on this machine, which Dataflow's workers cannot read; "
                         "give a gs:// --mirror that holds the same LANGwiki/DATE/ folders (gcloud storage cp -r "
                         f"{mirror.rstrip('/')}/LANGwiki gs://BUCKET/wikimedia/), or leave --mirror out for "
                         "Wikimedia's own server")
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
            raise ValueError(f"{said}: cannot reach {where} ({why}): {what}; check the network (and "
                             "HTTPS_PROXY if this machine needs a proxy), then run the same command again")
    missing = _no_credentials(timeout_s)
    if missing:
        raise ValueError(f"{said}: no Google Cloud credentials on this machine ({missing}); set "
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


def check_runner(workers: int, runner: str, beam_args=(), *, said: str | None = None) -> None:
    """Beam checks the runner's name and its options (Dataflow's --project, --region, ...) when a
    Pipeline is made: made here once, so that a mistake is named before anything is written,
    with the runner as the user typed it (`said`). Raises ValueError."""
    said = said or f"--runner {runner}"
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
        raise ValueError(f"{said}: {text}") from None
    except ImportError as e:  # Beam's own words: "Google Cloud Dataflow runner not available, please install ..."
        raise ValueError(f"{said}: {e}") from None
    finally:
        root.setLevel(level)
