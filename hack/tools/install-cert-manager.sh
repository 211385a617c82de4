#!/usr/bin/env bash
# Builds cert-manager's controller and CA injector from source into the given
# bin directory (cert-manager-controller, cert-manager-cainjector), at the
# cert-manager version pinned in hack/tools/cert-manager/go.mod: thin mains of
# that module wire the controllers of cert-manager's root module. A binary
# that already reports the pinned version is kept, so running this again costs
# seconds. Everything comes through the Go module proxy: no release binary is
# downloaded.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${1:-$here/../../bin}"
mkdir -p "$bin"
bin="$(cd "$bin" && pwd)"
cd "$here/cert-manager"

version="$(go list -m -f '{{.Version}}' github.com/cert-manager/cert-manager)"

# build NAME: builds ./cmd/NAME unless bin/NAME --version prints "NAME VERSION".
build() {
  local name="$1" want="$1 $version"
  if [[ -x "$bin/$name" ]] && [[ "$("$bin/$name" --version 2>/dev/null)" == "$want" ]]; then
    echo "bin/$name: $version (up to date)"
    return
  fi
  echo "bin/$name: building $version ..."
  local start=$SECONDS
  go build -o "$bin/$name.tmp" -ldflags "-s -w" "./cmd/$name"
  mv "$bin/$name.tmp" "$bin/$name"
  echo "bin/$name: built in $((SECONDS - start))s"
}

build cert-manager-controller
build cert-manager-cainjector
