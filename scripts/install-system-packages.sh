#!/usr/bin/env bash
# Install git and tmux from the system's packages when they are missing (Debian/Ubuntu).
set -euo pipefail
missing=()
command -v git >/dev/null 2>&1 || missing+=(git)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "kairo-orch needs ${missing[*]}; install them with your system's package manager" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing ${missing[*]} with apt-get" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
