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

# shellcheck source=lib.sh
source "$here/lib.sh"

build cert-manager-controller "cert-manager-controller $version" "-s -w" --version
build cert-manager-cainjector "cert-manager-cainjector $version" "-s -w" --version
