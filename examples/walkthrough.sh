#!/usr/bin/env bash
# Pairs a client and calls every /v1 endpoint once, and the extension's conditions, against a
# running `make run`. Run it from the project folder: `bash examples/walkthrough.sh`.
# It spends 32 of a user's 100 daily credits, so it can run twice in a day on one database,
# and it stops at the first answer that is not 2xx, printing its status and detail.
set -euo pipefail
BASE=${BASE:-http://127.0.0.1:8000}
CLEANAIR=${CLEANAIR:-.venv/bin/cleanair}
# Dates: a forecast's (tomorrow in UTC, its timezone below: valid even across midnight)
# and a route's start time (now).
DAY=$(python3 -c 'import datetime as d; print(d.datetime.now(d.UTC).date() + d.timedelta(1))')
NOW=$(date -u +%FT%TZ)

# `call` prints each answer and its status, and stops at the first that is not 2xx.
TOKEN=
call() {
  local auth=() answer
  if [ -n "$TOKEN" ]; then auth=(-H "Authorization: Bearer $TOKEN"); fi
  answer=$(curl -sS -w '\n%{http_code}' "${auth[@]}" -H 'content-type: application/json' "$@")
  BODY=${answer%$'\n'*}
  STATUS=${answer##*$'\n'}
  echo "$BODY -> $STATUS"
  case "$STATUS" in
    2??) ;;
    *) echo "walkthrough stopped: $STATUS $(field detail)" >&2; exit 1 ;;
  esac
}
# A string field of the last answer (these answers hold no escaped quotes).
field() { echo "$BODY" | sed -nE "s/.*\"$1\":\"([^\"]*)\".*/\1/p"; }

# Pairing: a premium user makes a 6-digit code (valid 60 s, single use) in the companion
# app; the CLI stands in for it. The token is shown once; only a keyed hash is stored.
$CLEANAIR users list | grep '^alice	' >/dev/null || $CLEANAIR users add alice
CODE=$($CLEANAIR pairing-code alice)
call -X POST "$BASE/v1/connections/token" -d "{\"code\": \"$CODE\", \"name\": \"my app\"}"
TOKEN=$(field token)                  # connection_id, name, scopes, token -> 201

call "$BASE/v1/quota"                 # the credit pool and the daily burst -> 200 (free)
call -X POST "$BASE/v1/airquality/score" -d '{"lat": 60.17, "lon": 24.94}'   # 1 credit
# The extension API (/ext/v1): the same point's conditions with the place's official index
# (Finland: the EEA's), the averages it was computed from, its advice for everyone and for
# each group it names ("group": "sensitive" for one), and where the numbers come from;
# 1 credit, like a score.
call -X POST "$BASE/ext/v1/airquality/conditions" -d '{"lat": 60.17, "lon": 24.94}'
# A heatmap tile of this hour's NO2 over central Helsinki (a PNG; free of credits, counted
# against a daily tile allowance; docs/tiles.md).
curl -sS -o no2.png -H "Authorization: Bearer $TOKEN" "$BASE/ext/v1/airquality/tiles/no2/12/2331/1185.png"

# A score by Wi-Fi scan needs known access points: `cleanair wifi import` reads a CSV with
# the header bssid,lat,lon and an optional accuracy_m column (metres).
POINTS=$(mktemp)
cat > "$POINTS" <<'CSV'
bssid,lat,lon,accuracy_m
00:1a:2b:3c:4d:5e,60.1699,24.9384,30
00:1a:2b:3c:4d:5f,60.1701,24.9390,30
CSV
$CLEANAIR wifi import "$POINTS" && rm "$POINTS"
call -X POST "$BASE/v1/airquality/score" \
     -d '{"wifi": [{"mac": "00:1a:2b:3c:4d:5e", "rssi": -55}, {"mac": "00:1a:2b:3c:4d:5f", "rssi": -70}]}'

# A day's forecast, 2 credits. Without coordinates the caller's address locates it (from
# 127.0.0.1 there is none to find: that call answers 422, not charged).
call -X POST "$BASE/v1/airquality/forecast" \
     -d "{\"latitude\": 60.17, \"longitude\": 24.94, \"date\": \"$DAY\", \"timezone\": \"UTC\"}"

# Route enrichment: 1 credit per waypoint.
call -X POST "$BASE/v1/airquality/routes" -d "{\"start_time\": \"$NOW\",
     \"activity_type\": \"walking\",
     \"waypoints\": [{\"lat\": 60.1675, \"lon\": 24.9465}, {\"lat\": 60.1745, \"lon\": 24.9460}]}"

# A route plan, 25 credits, is asynchronous: submit (202), then poll at most once a second.
call -X POST "$BASE/v1/routes" -d '{"activity_type": "walking",
    "start": {"latitude": 60.1675, "longitude": 24.9465},
    "end": {"latitude": 60.1745, "longitude": 24.9460}}'
ID=$(field request_id)
for _ in $(seq 60); do
  POLL=$(curl -sS "$BASE/v1/routes/$ID" -H "Authorization: Bearer $TOKEN")
  case "$POLL" in *'"status":"pending"'*) sleep 1 ;; *) break ;; esac
done
echo "$POLL"                          # {"status":"completed","result":{"routes":[...]...}}

call "$BASE/v1/quota"                 # 32 more credits used today
# Keep the token to try more: the best time to go (25 credits) is examples/departures.sh.
echo "export TOKEN=$TOKEN  # then: bash examples/departures.sh"
