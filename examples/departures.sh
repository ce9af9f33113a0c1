#!/usr/bin/env bash
# The best time to go (/ext/v1), with the token the walkthrough printed:
#   export TOKEN=ca_...; bash examples/departures.sh
# Asynchronous like a plan and 25 credits like one: the same trip planned for every start
# time from now to two hours on, 30 minutes apart (`step_minutes`); the result lists each
# departure's dose and picks the cleanest, with its route. Stops at an answer that is not 2xx.
set -euo pipefail
BASE=${BASE:-http://127.0.0.1:8000}
: "${TOKEN:?set TOKEN to a token, e.g. the one examples/walkthrough.sh prints}"
NOW=$(date -u +%FT%TZ)
LATER=$(python3 -c 'import datetime as d
print((d.datetime.now(d.UTC) + d.timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ"))')

ANSWER=$(curl -sS -w '\n%{http_code}' -X POST "$BASE/ext/v1/routes/departures" \
    -H "Authorization: Bearer $TOKEN" -H 'content-type: application/json' \
    -d "{\"activity_type\": \"walking\",
    \"start\": {\"latitude\": 60.1675, \"longitude\": 24.9465},
    \"end\": {\"latitude\": 60.1745, \"longitude\": 24.9460},
    \"earliest\": \"$NOW\", \"latest\": \"$LATER\"}")
BODY=${ANSWER%$'\n'*}
STATUS=${ANSWER##*$'\n'}
echo "$BODY -> $STATUS"               # {"request_id":"..."} -> 202
if [ "$STATUS" != 202 ]; then
  echo "stopped: $STATUS $(echo "$BODY" | sed -nE 's/.*"detail":"([^"]*)".*/\1/p')" >&2
  exit 1
fi
ID=$(echo "$BODY" | sed -E 's/.*"request_id":"([^"]+)".*/\1/')
for _ in $(seq 120); do
  POLL=$(curl -sS "$BASE/ext/v1/routes/departures/$ID" -H "Authorization: Bearer $TOKEN")
  case "$POLL" in *'"status":"pending"'*) sleep 1 ;; *) break ;; esac
done
echo "$POLL"             # {"status":"completed","result":{"departures":[...],"best":{...},...}}
