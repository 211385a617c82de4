#!/usr/bin/env bash
# Builds kube-apiserver, etcd and kubectl from source into the given bin
# directory, at the versions pinned in hack/tools/go.mod, and promtool and
# kube-state-metrics at the versions pinned in their own modules
# (hack/tools/prometheus, hack/tools/kube-state-metrics). A binary that
# already reports the pinned version is kept, so running this again costs
# seconds. Everything comes through the Go module proxy: no release binary
# is downloaded.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${1:-$here/../../bin}"
mkdir -p "$bin"
bin="$(cd "$bin" && pwd)"
cd "$here"

k8s_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
etcd_version="$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
kubectl_version="$(go list -m -f '{{.Version}}' k8s.io/kubectl | sed 's/^v0\./v1./')"
# minor, version_ldflags and build (install-node.sh uses them too).
source "$here/lib.sh"

build etcd "etcd Version: ${etcd_version#v}" "-s -w" --version
build kubectl "Client Version: $kubectl_version" "$(version_ldflags "$kubectl_version")" version --client
build kube-apiserver "Kubernetes $k8s_version" "$(version_ldflags "$k8s_version")" --version

# build_tool NAME MODULE PACKAGE VERSION PRINTED...: builds PACKAGE, a
# command pinned at VERSION by the module in directory MODULE (the tool
# directive of its go.mod), unless bin/NAME prints "NAME, version VERSION".
# Both tools print the version set through prometheus/common/version.
build_tool() {
  local name="$1" module="$2" pkg="$3" version="$4"; shift 4
  local want="$name, version $version "
  if [[ -x "$bin/$name" ]] && "$bin/$name" "$@" 2>/dev/null | grep -qF "$want"; then
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
