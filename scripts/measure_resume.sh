#!/usr/bin/env bash
# Resume re-attach time: two running agents, the supervisor killed with -9, then resume.
set -euo pipefail
K="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/kairo-orch"
export KAIRO_TMUX_SOCKET=kairo-measure-$$
for run in 1 2 3 4 5; do
  d=$(mktemp -d); cd "$d"; git init -q -b main; git -c user.name=a -c user.email=a@b commit -q --allow-empty -m i
  printf "version: 1\nname: m\nagent: {kind: shell, run: 'sleep 4; echo \$KAIRO_SUBTASK_ID > \$KAIRO_SUBTASK_ID.txt'}\nsubtasks:\n  - id: a\n  - id: b\n" > ../m-$run.yaml
  $K start ../m-$run.yaml --detach 2>/dev/null
  until [ "$(ls .git/kairo/runs/*/*/1/started.json 2>/dev/null | wc -l)" = 2 ]; do sleep 0.05; done
  pid=$($K status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["supervisor_pid"])')
  kill -9 "$pid"; sleep 0.2
  t0=$(date +%s.%N)
  $K resume --detach 2>/dev/null
  t1=$(date +%s.%N)
  until grep -c '"reattached"' .git/kairo/runs/*/supervisor.log 2>/dev/null | grep -q 2; do sleep 0.01; done
  t2=$(date +%s.%N)
  python3 -c "print(f'resume command {($t1-$t0):.3f} s, both agents re-attached after {($t2-$t0):.3f} s')"
  $K resume --wait >/dev/null 2>&1 || true
  until [ "$($K status --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')" = COMPLETED ]; do sleep 0.2; done
  cd /; rm -rf "$d" "$(dirname "$d")/m-$run.yaml"
done
tmux -L "$KAIRO_TMUX_SOCKET" kill-server
