# GPU image for the Ray cluster (head and GPU workers of infra/k8s/raycluster.yaml): CUDA, Python
# 3.11, the pinned stack of pyproject.toml with the CUDA build of torch, and this project installed.
#
# Build (from the repository root; tests/infra/test_manifests.py reads the tag from this line):
#   docker build -f infra/docker/gpu.Dockerfile -t ghcr.io/canine-pretrain/canine-gpu:0.1.0 .
# The tag is the project version and is pushed once (infra/docker/release.sh refuses a tag the
# registry already has): a changed image gets a new version, never the old tag.
#
# The head uses the same image although it has no GPU: KubeRay needs one Ray and Python version
# across the cluster, and one image is one thing to rebuild. The devel flavour of CUDA carries
# nvcc, which DeepSpeed needs to JIT-build its CUDA ops should a config ever ask for one (our
# optimizers are torch ones, training/train/optim.py, so none is built by default).
# An exact CUDA / cuDNN / Ubuntu version; to pin its digest as well, pass
# --build-arg CUDA_IMAGE=nvidia/cuda:12.8.1-cudnn-devel-ubuntu22.04@sha256:<digest>.
ARG CUDA_IMAGE=nvidia/cuda:12.8.1-cudnn-devel-ubuntu22.04
FROM ${CUDA_IMAGE}

# torch 2.13's CUDA 12.8 wheels match the base image's CUDA; keep the two in step.
ARG TORCH_INDEX=https://download.pytorch.org/whl/cu128
ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

# Python 3.11 from deadsnakes (Ubuntu 22.04 ships 3.10); wget for KubeRay's health probes; ninja
# for DeepSpeed's op builder.
RUN apt-get update \
 && apt-get install -y --no-install-recommends software-properties-common ca-certificates gnupg wget curl git ninja-build build-essential \
 && add-apt-repository -y ppa:deadsnakes/ppa \
 && apt-get update \
 && apt-get install -y --no-install-recommends python3.11 python3.11-venv python3.11-dev \
 && rm -rf /var/lib/apt/lists/* \
 && python3.11 -m venv /opt/venv \
 && pip install pip==26.3

# Same order as the Makefile's set-up: torch first (here the CUDA build), then DeepSpeed built
# against it without build isolation (or its build pulls another torch), then the project.
RUN pip install --index-url ${TORCH_INDEX} torch==2.13.0 \
 && pip install ninja==1.13.2 numpy==2.4.6 \
 && pip install --no-build-isolation deepspeed==0.19.8

WORKDIR /opt/canine
COPY . /opt/canine
# Not editable: the job's code is what was built into the image. infra/ stays in /opt/canine for
# the scheduled job's script and the DeepSpeed configs.
RUN pip install '/opt/canine[train,hf]' \
 && python -c "import jobs.cli, training, contract.schema, ray, deepspeed, s3fs, gcsfs, transformers; print('canine', ray.__version__, deepspeed.__version__)"

# The CLI is the entry point; KubeRay overrides the command with `ray start ...` for cluster pods.
CMD ["canine", "--help"]
