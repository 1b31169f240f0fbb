#!/usr/bin/env bash
# Preprocess the latest (or a named) Wikipedia dump of every language in a list as ONE Beam run:
# the languages are smoothed together (share^alpha, pipeline/beam/job.py SampleLanguages) and share
# one CANINE-S vocabulary, so they belong in one output, the one a pretraining run reads. The
# Kubernetes CronJob (infra/k8s/preprocess-cronjob.yaml) runs this script from the image; cron
# runs it from a checkout (docs/schedule.md). Settings come from the environment:
#
#   CANINE_LANGUAGES        required, space-separated wiki codes: "en ja ko zh-min-nan"
#   CANINE_OUTPUT           required, shard root; the run writes <root>/<langs>/<date>
#                           (pipeline/sources/dumps.py output_subpath, e.g. en-ja-ko/20261101)
#   CANINE_DUMP_DATE        YYYYMMDD, or "latest" (default), pinned to the date it points at
#   CANINE_MIRROR           dump mirror (default https://dumps.wikimedia.org)
#   CANINE_BEAM_FLAGS       file of Beam options, one per line, '#' comments (infra/beam/*.flags);
#                           unset: `canine preprocess`'s own default runner (DirectRunner)
#   CANINE_PREPROCESS_ARGS  extra preprocess arguments, split on spaces (e.g. "--workers 4")
#   CANINE                  the command (default "canine"; e.g. "python -m jobs.cli")
#
# Before any Beam work starts, every dump and its index must be on the mirror (else exit 2,
# naming the missing URLs). The exit status is preprocess's own: a run on an output that
# another run is writing is refused by that output's lock (jobs/lock.py), a finished one is a no-op.
set -euo pipefail

: "${CANINE_LANGUAGES:?set CANINE_LANGUAGES, e.g. \"en ja ko\"}"
: "${CANINE_OUTPUT:?set CANINE_OUTPUT, the shard root (e.g. gs://canine-data/shards)}"
date_spec="${CANINE_DUMP_DATE:-latest}"
mirror="${CANINE_MIRROR:-https://dumps.wikimedia.org}"
read -r -a canine <<< "${CANINE:-canine}"
read -r -a extra <<< "${CANINE_PREPROCESS_ARGS:-}"
log() { echo "preprocess-languages: $(date -u +%FT%TZ) $*" >&2; }

beam=()
if [[ -n "${CANINE_BEAM_FLAGS:-}" ]]; then
  if [[ ! -r "$CANINE_BEAM_FLAGS" ]]; then
    log "CANINE_BEAM_FLAGS=$CANINE_BEAM_FLAGS is not a readable file"
    exit 2
  fi
  # One option per line; blank and comment lines dropped, surrounding blanks trimmed.
  while IFS= read -r line || [[ -n "$line" ]]; do
    line="${line#"${line%%[![:space:]]*}"}"
    line="${line%"${line##*[![:space:]]}"}"
    [[ -z "$line" || "$line" == \#* ]] && continue
    beam+=("$line")
  done < "$CANINE_BEAM_FLAGS"
fi

specs=() names=()
for lang in $CANINE_LANGUAGES; do
  specs+=(--dump "$lang:$date_spec")
  names+=("$lang:$date_spec")
done
# `canine preprocess --dump` resolves the dumps (`latest` pinned to its date, every dump and
# index checked on the mirror, the output keyed <langs>/<date>) and takes the output's lock:
# the same code path as a run by hand (pipeline/run.py preprocess()).
cmd=("${canine[@]}" preprocess "${specs[@]}" --mirror "$mirror" --output "${CANINE_OUTPUT%/}" "${extra[@]}")
if (( ${#beam[@]} )); then
  cmd+=(-- "${beam[@]}")
fi
log "start ${names[*]} -> ${CANINE_OUTPUT%/}/<langs>/<date>"
status=0
"${cmd[@]}" || status=$?
if (( status )); then
  log "FAILED ${names[*]} (exit $status)"
else
  log "done ${names[*]}"
fi
exit "$status"
