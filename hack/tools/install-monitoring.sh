#!/usr/bin/env bash
# Builds promtool and kube-state-metrics from source into the given bin
# directory, at the versions pinned in their own modules
# (hack/tools/prometheus, hack/tools/kube-state-metrics: they need newer
# k8s.io libraries than kube-apiserver's), for the monitoring tests
# (test/monitoring; make monitoring-tools, a prerequisite of make e2e). A
# binary that already reports the pinned version is kept, so running this
# again costs seconds.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${1:-$here/../../bin}"
mkdir -p "$bin"
bin="$(cd "$bin" && pwd)"
cd "$here"

# build_tool NAME MODULE PACKAGE VERSION PRINTED...: builds PACKAGE, a
# command pinned at VERSION by the module in directory MODULE (the tool
# directive of its go.mod), unless bin/NAME prints "NAME, version VERSION".
# Both tools print the version set through prometheus/common/version.
build_tool() {
  local name="$1" module="$2" pkg="$3" version="$4"; shift 4
  local want="$name, version $version "
  # grep reads all of it (not -q): under pipefail a grep that quits at the
  # first match can leave the binary killed by SIGPIPE, and the pipeline
  # failing, and a current binary rebuilt.
  if [[ -x "$bin/$name" ]] && "$bin/$name" "$@" 2>/dev/null | grep -F "$want" >/dev/null; then
    echo "bin/$name: $version (up to date)"
    return
  fi
  echo "bin/$name: building $version ..."
  local start=$SECONDS
  (cd "$module" && go build -o "$bin/$name.tmp" \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$version" "$pkg")
  mv "$bin/$name.tmp" "$bin/$name"
  echo "bin/$name: built in $((SECONDS - start))s"
}

promtool_version="$(cd prometheus && go list -m -f '{{.Version}}' github.com/prometheus/prometheus)"
ksm_version="$(cd kube-state-metrics && go list -m -f '{{.Version}}' k8s.io/kube-state-metrics/v2)"
build_tool promtool prometheus github.com/prometheus/prometheus/cmd/promtool "$promtool_version" --version
build_tool kube-state-metrics kube-state-metrics k8s.io/kube-state-metrics/v2 "$ksm_version" version
