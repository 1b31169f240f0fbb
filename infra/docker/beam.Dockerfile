# Beam image: the launcher of infra/k8s/preprocess-cronjob.yaml, and the SDK harness container of
# Dataflow workers (--sdk_container_image) and of Flink's Beam worker-pool sidecar. The pipeline's
# DoFns import `pipeline.*`, so the workers need this project installed, not just Beam.
#
# Build (from the repository root; tests/infra/test_manifests.py reads the tag from this line):
#   docker build -f infra/docker/beam.Dockerfile -t ghcr.io/canine-pretrain/canine-beam:0.1.0 .
# The tag is the project version and is pushed once (infra/docker/release.sh refuses a tag the
# registry already has): a changed image gets a new version, never the old tag.
#
# Based on Apache Beam's own SDK image of the pinned version: its /opt/apache/beam/boot entry
# point is what Dataflow and the Flink worker pool (--worker_pool) start. To pin its digest as
# well, pass it: --build-arg BEAM_IMAGE=apache/beam_python3.11_sdk:2.77.0@sha256:<digest>
# (`docker buildx imagetools inspect apache/beam_python3.11_sdk:2.77.0` prints it).
ARG BEAM_VERSION=2.77.0
ARG BEAM_IMAGE=apache/beam_python3.11_sdk:${BEAM_VERSION}
FROM ${BEAM_IMAGE}

ARG BEAM_VERSION
# Flink 1.20, the long-term-support release of Flink 1.x, one of the versions Beam 2.77 publishes
# a job server for (FlinkRunnerOptions.PUBLISHED_FLINK_VERSIONS). It must match the Flink cluster.
ARG FLINK_VERSION=1.20
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1

# The Flink job-server jar, baked in: with --flink_submit_uber_jar the launcher uploads it to the
# Flink REST API itself (no Java needed here), and nothing is fetched from Maven at run time.
ADD https://repo1.maven.org/maven2/org/apache/beam/beam-runners-flink-${FLINK_VERSION}-job-server/${BEAM_VERSION}/beam-runners-flink-${FLINK_VERSION}-job-server-${BEAM_VERSION}.jar \
    /opt/beam/jars/

# The preprocessing install only (pyproject.toml's base dependencies): every Dataflow worker
# pulls this image, and none of it needs torch, DeepSpeed or Ray (tests/test_install_roles.py
# runs preprocess, inspect and validate with them unimportable). The check below fails the build
# if one of them came in after all.
WORKDIR /opt/canine
COPY . /opt/canine
RUN pip install /opt/canine \
 && python -c "import apache_beam, apache_beam.io.gcp.gcsio, s3fs, gcsfs, jobs.cli, contract.schema, pipeline.beam.job; assert apache_beam.__version__ == '${BEAM_VERSION}', apache_beam.__version__" \
 && python -c "import importlib.util as u; extra = [m for m in ('torch', 'deepspeed', 'ray') if u.find_spec(m)]; assert not extra, extra" \
 && canine --version
# The base image's ENTRYPOINT (/opt/apache/beam/boot) stays: Dataflow and the worker pool rely on it;
# the CronJob sets its own command.
