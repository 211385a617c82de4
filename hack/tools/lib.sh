# Shell functions shared by install-node.sh and
# install-cert-manager.sh (sourced, not run): they build the commands of the
# current directory's module into "$bin" (set by the caller), and skip a
# binary that already reports the version wanted.

minor() { echo "$1" | sed -E 's/^v?[0-9]+\.([0-9]+)\..*/\1/'; }

# version_ldflags VERSION: what makes a Kubernetes binary report VERSION.
version_ldflags() {
  echo "-s -w -X k8s.io/component-base/version.gitVersion=$1 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(minor "$1")"
}

# build NAME WANT LDFLAGS PRINTED...: builds ./cmd/NAME unless bin/NAME,
# run with the arguments PRINTED, prints WANT.
build() {
  local name="$1" want="$2" ldflags="$3"; shift 3
  # grep reads all of it (not -q): under pipefail a grep that quits at the
  # first match can leave the binary killed by SIGPIPE, and the pipeline
  # failing, and a current binary rebuilt.
  if [[ -x "$bin/$name" ]] && "$bin/$name" "$@" 2>/dev/null | grep -F "$want" >/dev/null; then
    echo "bin/$name: $want (up to date)"
    return
  fi
  echo "bin/$name: building $want ..."
  local start=$SECONDS
  go build -o "$bin/$name.tmp" -ldflags "$ldflags" "./cmd/$name"
  mv "$bin/$name.tmp" "$bin/$name"
  echo "bin/$name: built in $((SECONDS - start))s"
}
