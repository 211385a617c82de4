#!/usr/bin/env bash
# Builds kube-apiserver, etcd and kubectl from source into the given bin
# directory, at the versions pinned in hack/tools/go.mod (make tools;
# make run's driver, hack/tools/makerun, does the same with progress
# shown). install-monitoring.sh builds promtool and kube-state-metrics,
# which only the monitoring tests run. A binary that
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
