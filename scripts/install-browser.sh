#!/usr/bin/env bash
# The browser tests' Debian packages: chromium and chromium-driver (/usr/bin/chromium, /usr/bin/chromedriver).
# Installed with apt when missing (apt-get update first), as root or through sudo; when neither is possible,
# stops with the one command to run. Never a silent skip: the browser tests are part of the suite.
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then exit 0; fi
cmd="apt-get update && apt-get install -y --no-install-recommends chromium chromium-driver"
if [ "$(id -u)" -eq 0 ]; then
  sudo=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  sudo="sudo"
else
  echo "[install] the browser tests need Debian's chromium and chromium-driver: run  sudo sh -c '$cmd'" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "[install] the browser tests need Chromium and its driver at /usr/bin/chromium and /usr/bin/chromedriver (Debian: $cmd)" >&2
  exit 1
fi
echo "[install] installing Debian's chromium and chromium-driver for the browser tests (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q >/dev/null
$sudo apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null
for f in /usr/bin/chromium /usr/bin/chromedriver; do
  [ -x "$f" ] || { echo "[install] $f is still missing after apt-get install chromium chromium-driver" >&2; exit 1; }
done
