#!/bin/sh
# Registers drover's namespace on the Temporal server at TEMPORAL_ADDRESS, with the search
# attributes the task workflow upserts (workflows.SearchAttributes; a test keeps this list in
# step). Safe to run again: an existing namespace is kept, existing attributes are left alone.
#
# TEMPORAL_NAMESPACE names the namespace (default `default`), TEMPORAL_NAMESPACE_RETENTION how long
# a closed task's history is kept (default 72h). Needs the `temporal` CLI.
set -eu

address="${TEMPORAL_ADDRESS:?TEMPORAL_ADDRESS must name the Temporal frontend}"
ns="${TEMPORAL_NAMESPACE:-default}"

# retry N CMD...: runs CMD until it succeeds, once a second, at most N times.
retry() {
  n=$1
  shift
  i=1
  until "$@"; do
    if [ "$i" -ge "$n" ]; then
      echo "temporal namespace: giving up on: $*" >&2
      return 1
    fi
    i=$((i + 1))
    sleep 1
  done
}

retry 120 temporal operator cluster health --address "$address" >/dev/null
if temporal operator namespace describe --address "$address" --namespace "$ns" >/dev/null 2>&1; then
  echo "temporal namespace: $ns exists"
else
  temporal operator namespace create --address "$address" --namespace "$ns" \
    --retention "${TEMPORAL_NAMESPACE_RETENTION:-72h}"
fi
# A new namespace reaches the frontend's cache within seconds; until then this fails and is retried.
retry 60 temporal operator search-attribute create --address "$address" --namespace "$ns" \
  --name DroverStatus --type Keyword \
  --name DroverCostUSD --type Double \
  --name DroverTurns --type Int \
  --name DroverModel --type Keyword \
  --name DroverWorkspace --type Keyword \
  --name DroverTitle --type Text \
  --name DroverAwaitingApproval --type Bool \
  --name DroverAwaitingSince --type Datetime \
  --name DroverAccount --type Keyword \
  --name DroverLimitResetsAt --type Datetime
echo "temporal namespace: $ns ready"
