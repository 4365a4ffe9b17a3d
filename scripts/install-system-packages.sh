#!/usr/bin/env bash
# Install git and tmux (required), bubblewrap (for the optional `bwrap` sandbox),
# chromium with its driver (the HTML report's tests: tests/browser.py) and iproute2 (`ip`,
# for the tests of separate hosts: tests/hosts; `git daemon` comes with Debian's git) from
# the system's packages when they are missing (Debian/Ubuntu).
set -euo pipefail
missing=()
command -v git >/dev/null 2>&1 || missing+=(git)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
optional=()
command -v bwrap >/dev/null 2>&1 || optional+=(bubblewrap)
[ -x /usr/bin/chromium ] || optional+=(chromium)
[ -x /usr/bin/chromedriver ] || optional+=(chromium-driver)
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || optional+=(iproute2)
[ ${#missing[@]} -eq 0 ] && [ ${#optional[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  # optional ones only: the bwrap sandbox says it is missing, the browser and hosts tests skip
  [ ${#missing[@]} -eq 0 ] && exit 0
  echo "kairo-orch needs ${missing[*]}; install them with your system's package manager" >&2
  exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing ${missing[*]} ${optional[*]} with apt-get" >&2
$sudo apt-get update -qq
if [ ${#missing[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ ${#optional[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${optional[@]}" >/dev/null ||
    echo "could not install ${optional[*]}: the bwrap sandbox, the browser or the hosts tests are unavailable" >&2
fi
