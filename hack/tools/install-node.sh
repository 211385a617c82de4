#!/usr/bin/env bash
# Makes this machine able to run the test environment's node (test/framework,
# Node): installs containerd, runc, the CNI plugins and iptables with apt when
# missing (Debian's containerd 1.6 ships ctr, which imports images), and
# builds kubelet, kube-controller-manager and kube-scheduler from source into
# the given bin directory, at the k8s.io/kubernetes version pinned in
# hack/tools/go.mod, and bin/pause-image.tar, the node's sandbox image (the
# static program of cmd/pause on an empty base). A binary that already
# reports the pinned version is kept, so running this again costs seconds.
#
# The node runs only on Linux, as root: elsewhere this does nothing (test/node
# skips), and without root it builds but installs nothing.
set -euo pipefail

if [[ "$(uname -s)" != Linux ]]; then
  echo "install-node.sh: the test environment's node runs only on Linux: nothing to do"
  exit 0
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${1:-$here/../../bin}"
mkdir -p "$bin"
bin="$(cd "$bin" && pwd)"
cd "$here"
source "$here/lib.sh"

# What the node runs besides the binaries built here, by the command that
# tells it is installed.
packages=()
command -v containerd >/dev/null || packages+=(containerd)
command -v runc >/dev/null || packages+=(runc)
[[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback && -x /usr/lib/cni/portmap ]] ||
  packages+=(containernetworking-plugins)
command -v iptables >/dev/null || packages+=(iptables)
command -v ip >/dev/null || packages+=(iproute2)
if (( ${#packages[@]} > 0 )); then
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
    echo "install-node.sh: missing ${packages[*]}, which the node needs: install them (as root; with apt-get on Debian)" >&2
  else
    echo "apt: installing ${packages[*]} ..."
    start=$SECONDS
    apt-get install -y --no-install-recommends "${packages[@]}" ||
      { apt-get update && apt-get install -y --no-install-recommends "${packages[@]}"; }
    echo "apt: installed in $((SECONDS - start))s"
  fi
fi

k8s_version="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"
ldflags="$(version_ldflags "$k8s_version")"
build kubelet "Kubernetes $k8s_version" "$ldflags" --version
build kube-controller-manager "Kubernetes $k8s_version" "$ldflags" --version
build kube-scheduler "Kubernetes $k8s_version" "$ldflags" --version

# The sandbox image: rebuilt every time (seconds, from the build cache), so
# that it follows cmd/pause; the tarball is only replaced when it changed.
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin/pause" ./cmd/pause
go run ./cmd/pause-image --binary "$bin/pause" --out "$bin/pause-image.tar"
