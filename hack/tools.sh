#!/usr/bin/env bash
# Builds the local control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler), kwok and golangci-lint from their official Go modules, never
# from a release download. Binaries are kept in a per-user cache keyed by version, so a fresh
# clone (CI's, for one) reuses them; bin/ gets symlinks into that cache.
#
#   hack/tools.sh                  build what is missing, link into bin/
#   hack/tools.sh golangci-lint    only golangci-lint (`make lint` needs nothing else)
#   hack/tools.sh --print          print the cache directory and exit
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
K8S_VERSION="v1.37.2"
ETCD_VERSION="v3.7.0"
KWOK_VERSION="v0.7.0"
GOLANGCI_LINT_VERSION="v2.15.0"
CACHE="${KARPFUNC_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpfunc/tools}"
BIN="$ROOT/bin"

case "${1:-}" in
  --print) echo "$CACHE"; exit 0 ;;
  ""|golangci-lint) ;;
  *) echo "tools: unknown argument $1; usage: hack/tools.sh [golangci-lint|--print]" >&2; exit 2 ;;
esac
ONLY_LINT=""
[[ "${1:-}" == "golangci-lint" ]] && ONLY_LINT=1
mkdir -p "$CACHE" "$BIN"

# build NAME VERSION MODULE_DIR PACKAGE [LDFLAGS]
build() {
  local name="$1" version="$2" dir="$3" pkg="$4" ldflags="${5:-}"
  local out="$CACHE/$name-$version/$name"
  if [[ ! -x "$out" ]]; then
    local start=$SECONDS
    echo "tools: building $name $version from $pkg (first time only; minutes on 2 cores)..." >&2
    mkdir -p "$(dirname "$out")"
    (cd "$ROOT/tools/$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" -o "$out.tmp" "$pkg")
    mv "$out.tmp" "$out"
    echo "tools: built $name in $((SECONDS - start))s -> $out" >&2
  fi
  ln -sfn "$out" "$BIN/$name"
}

k8s_ldflags() {
  local minor; minor="$(echo "$K8S_VERSION" | cut -d. -f2)"
  local flags=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitVersion=$K8S_VERSION"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$flags"
}

if [[ -z "$ONLY_LINT" ]]; then
  build etcd "$ETCD_VERSION" etcd ./etcd \
    "-X go.etcd.io/etcd/api/v3/version.GitSHA=module"
  for cmd in kube-apiserver kube-controller-manager kube-scheduler; do
    build "$cmd" "$K8S_VERSION" kubernetes "k8s.io/kubernetes/cmd/$cmd" "$(k8s_ldflags)"
  done
  build kwok "$KWOK_VERSION" kwok sigs.k8s.io/kwok/cmd/kwok \
    "-X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION"
fi
# golangci-lint is built with `go install` at its pinned version (its own go.mod
# pins its linters), not from tools/: it is a developer tool, not a control-plane part.
lint_out="$CACHE/golangci-lint-$GOLANGCI_LINT_VERSION/golangci-lint"
if [[ ! -x "$lint_out" ]]; then
  start=$SECONDS
  echo "tools: building golangci-lint $GOLANGCI_LINT_VERSION (first time only; minutes on 2 cores)..." >&2
  GOBIN="$(dirname "$lint_out")" CGO_ENABLED=0 go install \
    "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$GOLANGCI_LINT_VERSION"
  echo "tools: built golangci-lint in $((SECONDS - start))s -> $lint_out" >&2
fi
ln -sfn "$lint_out" "$BIN/golangci-lint"

echo "tools: ready in $BIN (cache $CACHE)" >&2
