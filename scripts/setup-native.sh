#!/usr/bin/env bash
# Installs the Debian -dev packages node-rdkafka's bundled librdkafka links against. They must be
# present when node-rdkafka compiles (npm ci), or librdkafka silently builds without zstd, lz4,
# SSL or SASL/SCRAM. Other systems: see the README ("Native build"). When they cannot be installed
# (not root and no sudo, no network), it warns and goes on: scripts/check-native.mjs then says what
# is missing and which targets need it.
set -euo pipefail

PACKAGES=(build-essential python3 zlib1g-dev libzstd-dev liblz4-dev libssl-dev libsasl2-dev)

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup-native: not a Debian-based system; make sure the equivalents of ${PACKAGES[*]} are installed" >&2
  exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-native: build dependencies present (${PACKAGES[*]})"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "setup-native: warning: missing ${missing[*]}; install them as root: apt-get install -y ${missing[*]} (going on without them)" >&2
    exit 0
  fi
fi
echo "setup-native: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
  echo "setup-native: installed ${missing[*]}"
else
  echo "setup-native: warning: could not install ${missing[*]} (going on without them)" >&2
fi
