#!/usr/bin/env bash
# Build and push the project's two images, each tag once. The tag is the project version
# (pyproject.toml), the one the manifests and Beam flags name (tests/infra/test_manifests.py):
# an image is never pushed over a tag the registry already has, so a tag always means the same
# bytes, and what a cluster runs is known from its manifests. To ship a change, bump the version
# (and the tags in infra/), commit, and run this again. Each image carries the commit it was
# built from (label org.opencontainers.image.revision); a checkout with uncommitted changes is
# refused, so that commit is the whole truth.
#
#   infra/docker/release.sh              # from any directory; needs docker (DOCKER=podman works too)
set -euo pipefail
cd "$(dirname "$0")/../.."
DOCKER=${DOCKER:-docker}

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml)
[ -n "$version" ] || { echo "release.sh: no version in pyproject.toml" >&2; exit 2; }
if [ -n "$(git status --porcelain)" ]; then
  echo "release.sh: the checkout has uncommitted changes; an image is built from a commit" >&2
  exit 2
fi
commit=$(git rev-parse HEAD)

image_of() {  # the tag a Dockerfile documents on its build line
  sed -n "s|^#   docker build -f infra/docker/$1.Dockerfile -t \([^ ]*\) \.$|\1|p" "infra/docker/$1.Dockerfile"
}

for name in gpu beam; do
  image=$(image_of "$name")
  if [ "${image##*:}" != "$version" ]; then
    echo "release.sh: infra/docker/$name.Dockerfile builds $image, not version $version of pyproject.toml" >&2
    exit 2
  fi
  if "$DOCKER" manifest inspect "$image" >/dev/null 2>&1; then
    echo "release.sh: $image is already in the registry; a tag is never reused: bump the version" >&2
    exit 2
  fi
done
for name in gpu beam; do
  image=$(image_of "$name")
  "$DOCKER" build -f "infra/docker/$name.Dockerfile" -t "$image" \
    --label "org.opencontainers.image.version=$version" --label "org.opencontainers.image.revision=$commit" .
  "$DOCKER" push "$image"
done
echo "release.sh: pushed $(image_of gpu) and $(image_of beam) from $commit"
