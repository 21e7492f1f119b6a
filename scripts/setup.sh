#!/usr/bin/env bash
# Installs what Shoal's build and tests need on a fresh Debian machine:
#   - apt: clang + libclang-dev (RocksDB's bindgen), python3-venv, openssl (bench/compare
#     --tls), chromium (the dashboard's test), and for the driver suites of other languages (scripts/driver-tests.sh) Go,
#     Maven and a JDK when they are missing
#   - a Python venv under $SHOAL_VENV (default $HOME/.cache/shoal/venv) with the
#     DataStax Python driver, cqlsh and pytest, pinned.
# Idempotent: each step is skipped when already done.
set -euo pipefail

SHOAL_CACHE="${SHOAL_CACHE:-$HOME/.cache/shoal}"
SHOAL_VENV="${SHOAL_VENV:-$SHOAL_CACHE/venv}"
mkdir -p "$SHOAL_CACHE"

need_apt=()
command -v clang >/dev/null 2>&1 || need_apt+=(clang)
[ -n "$(ls /usr/lib/llvm-*/lib/libclang.so* 2>/dev/null | head -1)" ] || need_apt+=(libclang-dev)
python3 -c 'import venv, ensurepip' 2>/dev/null || need_apt+=(python3-venv)
command -v go >/dev/null 2>&1 || need_apt+=(golang-go)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
command -v javac >/dev/null 2>&1 || need_apt+=(default-jdk-headless)
# The dashboard's test (tests/python/test_dashboard.py) drives headless Chromium.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
# bench/compare --tls makes its throw-away certificates with the openssl command.
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
# bench/chaos (the fault harness): nft drops packets inside the nodes' network namespaces (partitions, lossy links),
# libfaketime offsets one node's clock (the skew scenario).
command -v nft >/dev/null 2>&1 || need_apt+=(nftables)
[ -n "$(ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -1)" ] || need_apt+=(libfaketime)
command -v cargo >/dev/null 2>&1 || { echo "setup: cargo (Rust) is required; install rustup first" >&2; exit 1; }
# rustfmt and clippy run in scripts/test.sh.
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  echo "setup: rustup component add rustfmt clippy"
  rustup component add rustfmt clippy
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: apt-get install ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# Pinned client versions (checked against Cassandra 5.0.9).
# kubernetes-validate: the deploy manifests' schemas, offline (tests/python/test_deploy.py).
# pytest-xdist: the Python suite runs its files on two workers (scripts/test.sh).
PY_PKGS=(cassandra-driver==3.30.1 cqlsh==6.2.2 pytest==8.3.4 pytest-xdist==3.8.0 lz4==4.4.5 python-snappy==0.7.3 prometheus-client==0.26.0
         kubernetes-validate==1.37.0 "moto[server]==5.2.5")
STAMP="$SHOAL_VENV/.shoal-pkgs"
if [ ! -x "$SHOAL_VENV/bin/python" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "${PY_PKGS[*]}" ]; then
  echo "setup: creating Python venv at $SHOAL_VENV"
  python3 -m venv "$SHOAL_VENV"
  # The pure-Python driver build installs in seconds; the Cython one takes minutes.
  CASS_DRIVER_NO_CYTHON=1 "$SHOAL_VENV/bin/pip" install -q --disable-pip-version-check "${PY_PKGS[@]}"
  echo "${PY_PKGS[*]}" > "$STAMP"
fi
