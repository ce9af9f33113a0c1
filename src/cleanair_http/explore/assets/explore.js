// The cleanair route explorer: draws the street networks from the tiles /explore/networks lists
// (those of the visible area, as the map moves), pairs itself (a pairing code redeemed for a
// token) or takes a pasted token, plans routes through the /v1 API and charts a point's
// forecast. Plain JavaScript
// with no build step and nothing fetched from any other host (docs/explore.md).
"use strict";

(() => {
  const SVG_NS = "http://www.w3.org/2000/svg"; // a namespace name, never fetched
  const TOKEN_KEY = "cleanair.explore.token";
  // The contract allows 60 plan polls a minute per connection: stay just under it.
  const POLL_EVERY_MS = 1100;
  // Map units per degree of latitude: big enough that rounded SVG numbers stay exact.
  const SCALE = 1e5;
  const ROAD_CLASSES = ["path", "local", "collector", "arterial", "motorway"];
  // The outlines a tile sends, in drawing order.
  const AREA_KINDS = ["parks", "water"];
  // A tile drawn about this many pixels wide: a city view needs a handful.
  const TILE_PX = 512;
  // At most this many tiles in view: a wider view takes a lower zoom (fewer streets).
  const MAX_TILES = 36;
  // Tiles kept in memory, drawn or not: panning back draws them at once.
  const KEEP_TILES = 300;
  // The Earth's circumference in metres (Web Mercator's sphere).
  const EARTH_M = 40_075_016.686;
  // The shipped network's name (cleanair_runtime.composition.bootstrap.DEFAULT_NETWORK_NAME): shown first
  // when several are loaded, as it holds the city the service ships for.
  const SHIPPED_NETWORK = "helsinki";
  // The planner's longest alternative, against the direct route (planner.MAX_DETOUR).
  const MAX_DETOUR_PCT = 25;
  // How near, in screen pixels, the pointer must be to a street for its name to show.
  const NAME_WITHIN_PX = 8;
  // The hour to try when streets differ too little: the morning rush hour, local time (the
  // embedded model's NO2 peaks at 08 solar time, and the street increments follow traffic;
  // docs/explore.md).
  const BUSY_HOUR = 8;
  // Local hours counted as night (from NIGHT_FROM to NIGHT_UNTIL): traffic is light, the
  // streets' air much alike.
  const [NIGHT_FROM, NIGHT_UNTIL] = [22, 6];
  // The map's pins in screen pixels, the point at the tip: A (start) and B (end) carry their
  // letter; the forecast point is a diamond.
  const PIN = "M0 0C-2 -6 -10 -11 -10 -19A10 10 0 1 1 10 -19C10 -11 2 -6 0 0Z";
  const DIAMOND = "M0 -9L9 0L0 9L-9 0Z";

  const $ = (id) => document.getElementById(id);
  const map = $("map");
  const state = {
    networks: [],
    view: null, // the network whose bounds the projection and the first view fit
    viewBox: null, // [x, y, width, height]
    tiles: new Map(), // tile address -> its parsed JSON, least recently used first
    drawn: new Map(), // tile address -> {tile, groups, named} of the tiles on the map
    tileRun: 0, // bumps on every view change: a stale tile load draws nothing
    tileTimer: null,
    viewTimer: null,
    start: null,
    end: null,
    forecastPoint: null,
    plan: null, // the last completed PlanResult
    planStart: null, // the Date the last completed plan starts at
    selected: 0,
    run: 0, // bumps on every submission: a stale poll loop stops
    named: [], // named street segments in map units: [x1, y1, x2, y2, name]
  };

  // -- small helpers ------------------------------------------------------------------------

  function svg(tag, attributes = {}, parent = null) {
    const element = document.createElementNS(SVG_NS, tag);
    for (const [name, value] of Object.entries(attributes)) {
      element.setAttribute(name, String(value));
    }
    if (parent) parent.appendChild(element);
    return element;
  }

  function html(tag, text, className) {
    const element = document.createElement(tag);
    if (text !== undefined) element.textContent = text;
    if (className) element.className = className;
    return element;
  }

  const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  function formatPoint(point) {
    return point ? `${point.lat.toFixed(5)}, ${point.lon.toFixed(5)}` : "not set";
  }

  function formatDistance(metres) {
    return metres >= 1000 ? `${(metres / 1000).toFixed(2)} km` : `${Math.round(metres)} m`;
  }

  function formatDuration(seconds) {
    if (seconds === null || seconds === undefined) return "unknown";
    const minutes = Math.round(seconds / 60);
    return minutes >= 60 ? `${Math.floor(minutes / 60)} h ${minutes % 60} min` : `${minutes} min`;
  }

  function formatSigned(value, unit) {
    const sign = value > 0 ? "+" : value < 0 ? "−" : "±";
    return `${sign}${Math.abs(value).toFixed(unit === "%" ? 1 : 0)} ${unit}`;
  }

  // A Clean Air Score 0..100 as a colour from red (0) through yellow to green (100).
  function scoreColour(score) {
    if (score === null || score === undefined || Number.isNaN(score)) return "#888";
    const clamped = Math.max(0, Math.min(100, score));
    const lightness = 42 - Math.max(0, clamped - 60) / 4;
    return `hsl(${(clamped * 1.2).toFixed(0)} 75% ${lightness.toFixed(0)}%)`;
  }

  // -- the API ------------------------------------------------------------------------------

  function token() {
    return $("token").value.trim();
  }

  // One call to the /v1 API with the token in the Authorization header (and nowhere else);
  // `anonymous` calls (the pairing redemption) carry none.
  async function api(method, path, body, { anonymous = false } = {}) {
    const headers = { Accept: "application/json" };
    if (!anonymous) headers.Authorization = `Bearer ${token()}`;
    const init = { method, headers, cache: "no-store", credentials: "omit" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (error) {
      return { ok: false, status: 0, body: null, retryAfter: null, network: String(error) };
    }
    let parsed = null;
    const text = await response.text();
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch (error) {
      parsed = { detail: text };
    }
    const retry = Number.parseInt(response.headers.get("Retry-After") || "", 10);
    return {
      ok: response.ok,
      status: response.status,
      body: parsed,
      retryAfter: Number.isFinite(retry) ? retry : null,
    };
  }

  // A Retry-After as a person reads it: seconds when short, else the UTC time it ends
  // ("tomorrow 00:00 UTC"), rounded to the minute.
  function retryWords(seconds) {
    if (seconds < 120) return `in ${seconds} s`;
    const now = Date.now();
    const at = new Date(Math.round((now + seconds * 1000) / 60_000) * 60_000);
    const day = (ms) => new Date(ms).toISOString().slice(0, 10);
    const date = day(at.getTime());
    const which = date === day(now) ? "today" : date === day(now + 86_400_000) ? "tomorrow" : date;
    return `from ${which} ${at.toISOString().slice(11, 16)} UTC`;
  }

  // -- times and days, in the browser's time zone ---------------------------------------------

  function timeZone() {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  }

  function today() {
    // en-CA formats a date as YYYY-MM-DD, the contract's date format.
    return dateKey(new Date());
  }

  function dateKey(date) {
    return new Intl.DateTimeFormat("en-CA", { timeZone: timeZone() }).format(date);
  }

  function clockOf(date) {
    const format = new Intl.DateTimeFormat("en-GB", { hour: "2-digit", minute: "2-digit", timeZone: timeZone() });
    return format.format(date);
  }

  // "today", "tomorrow", "yesterday" or the weekday and date ("Sat 29 Nov"): calendar days
  // apart (an hour's arithmetic would be wrong on a daylight-saving day).
  function dayWord(date) {
    const days = Math.round((Date.parse(dateKey(date)) - Date.parse(today())) / 86_400_000);
    if (days === 0) return "today";
    if (days === 1) return "tomorrow";
    if (days === -1) return "yesterday";
    const format = new Intl.DateTimeFormat("en-GB", { weekday: "short", day: "numeric", month: "short", timeZone: timeZone() });
    return format.format(date);
  }

  // A time as a person reads it: "01:27" today, else with its day ("tomorrow 01:27",
  // "Sat 29 Nov 01:27").
  function dayClock(date) {
    const day = dayWord(date);
    return day === "today" ? clockOf(date) : `${day} ${clockOf(date)}`;
  }

  // The same in a sentence: "at 01:27", "tomorrow at 01:27", "on Sat 29 Nov at 01:27".
  function atWords(date) {
    const day = dayWord(date);
    const at = `at ${clockOf(date)}`;
    if (day === "today") return at;
    return ["tomorrow", "yesterday"].includes(day) ? `${day} ${at}` : `on ${day} ${at}`;
  }

  // What went wrong, in words a person can act on.
  function explain(answer) {
    if (answer.status === 0) return `The service could not be reached (${answer.network}).`;
    const detail = answer.body && answer.body.detail ? String(answer.body.detail) : "";
    const said = detail ? `: ${detail}` : "";
    switch (answer.status) {
      case 400:
        return `Refused (400)${said}.`;
      case 401:
        return `The token was not accepted (401)${said}. Paste a valid token.`;
      case 403:
        return `This token may not do that (403)${said}.`;
      case 404:
        return `Not found (404)${said}.`;
      case 422:
        return `The request was not valid (422)${said}.`;
      case 429: {
        const wait = answer.retryAfter === null ? "" : ` Try again ${retryWords(answer.retryAfter)}.`;
        return `Too many requests or no credits left (429)${said}.${wait}`;
      }
      case 503:
        return `A data source is unavailable (503)${said}. Nothing was charged.`;
      default:
        return `The service answered ${answer.status}${said}.`;
    }
  }

  function showError(id, message) {
    const element = $(id);
    element.textContent = message || "";
    element.hidden = !message;
  }

  // -- the token: paired or pasted ----------------------------------------------------------

  // Kept as a pasted token is: the field and this tab's session storage, nowhere else.
  function keepToken(value) {
    $("token").value = value;
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    else sessionStorage.removeItem(TOKEN_KEY);
    // The alerts panel (alerts.js) lists the new token's subscriptions and feed.
    document.dispatchEvent(new CustomEvent("cleanair:token"));
  }

  // A refused redemption in words: the answer's own `detail`, and what to do next.
  function explainPairing(answer) {
    const detail = answer.body && answer.body.detail ? `: ${answer.body.detail}` : "";
    switch (answer.status) {
      case 401:
        return `The code was not accepted (401)${detail}. A code works once, within 60 s of being made: make a new one.`;
      case 422:
        return `That is not a pairing code (422)${detail}. A code is the six digits the pairing-code command printed.`;
      case 429: {
        const wait = answer.retryAfter === null ? "" : ` Try again ${retryWords(answer.retryAfter)}.`;
        return `Too many pairing attempts (429)${detail}.${wait}`;
      }
      default:
        return explain(answer);
    }
  }

  // Redeem the typed pairing code (POST /v1/connections/token: no token, free) and keep the
  // token it gives.
  async function pair() {
    showError("pairing-error", "");
    $("pairing-status").textContent = "";
    // People copy codes with a space or a line end; the server judges what is left.
    const code = $("pairing-code").value.replace(/\s+/g, "");
    $("pair").disabled = true;
    try {
      const answer = await api("POST", "/v1/connections/token", { code, name: "explorer" }, { anonymous: true });
      if (answer.status !== 201 || !answer.body || !answer.body.token) {
        return showError("pairing-error", explainPairing(answer));
      }
      keepToken(answer.body.token);
      $("pairing-code").value = "";
      $("pairing-status").textContent =
        `Paired: the token of connection "${answer.body.name}" is in the field below, for this tab.`;
      showCredits();
    } finally {
      $("pair").disabled = false;
    }
  }

  // The credits left after a call: the quota is free to read, so it is read after each.
  async function showCredits() {
    if (!token()) return;
    const answer = await api("GET", "/v1/quota");
    if (!answer.ok || !answer.body) return;
    const { remaining, daily_remaining: today } = answer.body;
    $("credits").textContent = `Credits left: ${remaining} this month, ${today} today.`;
  }

  // Where the air comes from and, at `point`, which stations correct it now and how old
  // their hour is (GET /explore/air-source: no token, no credits).
  async function showAirSource(point) {
    const query = point ? `?lat=${point.lat.toFixed(6)}&lon=${point.lon.toFixed(6)}` : "";
    let answer;
    try {
      const response = await fetch(`/explore/air-source${query}`, { credentials: "omit" });
      if (!response.ok) return;
      answer = await response.json();
    } catch (error) {
      return;
    }
    const clock = new Intl.DateTimeFormat("en-GB", { hour: "2-digit", minute: "2-digit" });
    const asOf = new Date(answer.at);
    let fused = "not corrected by any station now";
    if (answer.fused && !answer.pollutants.length) {
      // Moved by more than 0.1 %, by stations each weighing under 1 % here (far ones).
      fused = "corrected a little by distant stations, none weighing 1 % here";
    } else if (answer.fused) {
      const latest = Math.max(...answer.pollutants.map((p) => Date.parse(p.hour_end)));
      const minutes = Math.max(0, Math.round((asOf.getTime() - latest) / 60_000));
      const count = answer.stations.length;
      fused =
        `fused with ${count} station${count === 1 ? "" : "s"} ` +
        `(their hour to ${clock.format(new Date(latest))}, ${minutes} min old)`;
    }
    $("air-source").textContent = `Air: ${answer.label}, ${fused}; as of ${clock.format(asOf)}.`;
  }

  // -- the map ------------------------------------------------------------------------------

  // Equirectangular about the view network's middle latitude: true to scale over a city.
  function project(lat, lon) {
    const [south, west, north] = state.view.bounds;
    const kx = Math.cos((((south + north) / 2) * Math.PI) / 180);
    return [(lon - west) * kx * SCALE, (north - lat) * SCALE];
  }

  function unproject(x, y) {
    const [south, west, north] = state.view.bounds;
    const kx = Math.cos((((south + north) / 2) * Math.PI) / 180);
    return { lat: north - y / SCALE, lon: west + x / (kx * SCALE) };
  }

  function setViewBox(box) {
    state.viewBox = box;
    map.setAttribute("viewBox", box.map((v) => v.toFixed(2)).join(" "));
    drawScale();
    // Once the map rests: a drag or a wheel turn moves it many times a second.
    clearTimeout(state.tileTimer);
    state.tileTimer = setTimeout(loadTiles, 150);
    // The air layer (air.js) loads its own tiles for the view once it rests, too.
    clearTimeout(state.viewTimer);
    state.viewTimer = setTimeout(() => document.dispatchEvent(new CustomEvent("cleanair:view")), 150);
  }

  // A map unit is 1e-5 degrees of latitude, the same distance across (see `project`).
  const METRES_PER_UNIT = 111_320 / SCALE;

  // The longest round distance that fits in about 120 pixels.
  function drawScale() {
    const metresPerPixel = pixels(1) * METRES_PER_UNIT;
    if (!Number.isFinite(metresPerPixel) || metresPerPixel <= 0) return;
    const lengths = [5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000];
    const metres = lengths.filter((m) => m / metresPerPixel <= 120).pop() || lengths[0];
    document.querySelector("#scale .bar").style.width = `${(metres / metresPerPixel).toFixed(1)}px`;
    document.querySelector("#scale .label").textContent =
      metres >= 1000 ? `${metres / 1000} km` : `${metres} m`;
  }

  function fitView(network) {
    const [south, west, north, east] = network.bounds;
    const [x0, y0] = project(north, west);
    const [x1, y1] = project(south, east);
    const margin = 0.03 * Math.max(x1 - x0, y1 - y0, 1);
    setViewBox([x0 - margin, y0 - margin, x1 - x0 + 2 * margin, y1 - y0 + 2 * margin]);
  }

  // -- the tiles ---------------------------------------------------------------------------

  // The zoom whose tiles are about TILE_PX wide on screen, and few enough to cover the view.
  function tileZoom(network, south, north) {
    const metresPerPixel = pixels(1) * METRES_PER_UNIT;
    const cosine = Math.cos((((south + north) / 2) * Math.PI) / 180);
    const z = Math.round(Math.log2((EARTH_M * cosine) / (TILE_PX * metresPerPixel)));
    return Math.max(0, Math.min(network.max_zoom, Number.isFinite(z) ? z : 0));
  }

  function tileX(lon, z) {
    return Math.floor(((lon + 180) / 360) * 2 ** z);
  }

  function tileY(lat, z) {
    const r = (lat * Math.PI) / 180;
    return Math.floor(((1 - Math.asinh(Math.tan(r)) / Math.PI) / 2) * 2 ** z);
  }

  // The addresses of the network's tiles in view, at the zoom the view's scale asks for.
  function tilesInView(network) {
    const [x, y, w, h] = state.viewBox;
    const corner = unproject(x, y);
    const far = unproject(x + w, y + h);
    const [south0, west0, north0, east0] = network.bounds;
    const south = Math.max(far.lat, south0);
    const north = Math.min(corner.lat, north0);
    const west = Math.max(corner.lon, west0);
    const east = Math.min(far.lon, east0);
    if (south > north || west > east) return [];
    let z = tileZoom(network, south, north);
    for (;;) {
      const [x0, x1, y0, y1] = [tileX(west, z), tileX(east, z), tileY(north, z), tileY(south, z)];
      if ((x1 - x0 + 1) * (y1 - y0 + 1) <= MAX_TILES || z === 0) {
        const found = [];
        for (let tx = x0; tx <= x1; tx += 1) {
          for (let ty = y0; ty <= y1; ty += 1) {
            found.push(network.tiles.replace("{z}", z).replace("{x}", tx).replace("{y}", ty));
          }
        }
        return found;
      }
      z -= 1;
    }
  }

  // One tile's JSON: from memory, else from the server (the browser's cache first: a tile's
  // address changes with its network, so what the browser kept is never stale).
  async function fetchTile(address) {
    if (state.tiles.has(address)) {
      const tile = state.tiles.get(address);
      state.tiles.delete(address);
      state.tiles.set(address, tile);
      return { tile };
    }
    let response;
    try {
      response = await fetch(address, { credentials: "omit" });
    } catch (error) {
      return { error: `The streets could not be loaded (${error}).` };
    }
    if (response.status === 429) {
      const retry = Number.parseInt(response.headers.get("Retry-After") || "", 10);
      const wait = Number.isFinite(retry) ? retry : 60;
      return { error: `Too many map requests from this address: the streets load again ${retryWords(wait)}.`, retry: wait };
    }
    if (response.status === 404) {
      return { error: "The street network changed on the server: reload the page." };
    }
    if (!response.ok) return { error: `The streets could not be loaded (${response.status}).` };
    const tile = await response.json();
    state.tiles.set(address, tile);
    while (state.tiles.size > KEEP_TILES) state.tiles.delete(state.tiles.keys().next().value);
    return { tile };
  }

  // Load the tiles in view and draw them; the ones no longer in view go once the new ones
  // are drawn, so the map never flashes empty.
  async function loadTiles() {
    const network = state.view;
    if (!network || !state.viewBox) return;
    const run = ++state.tileRun;
    const wanted = tilesInView(network);
    const answers = await Promise.all(wanted.map(fetchTile));
    if (run !== state.tileRun || network !== state.view) return;
    const problem = answers.find((answer) => answer.error);
    wanted.forEach((address, i) => {
      if (answers[i].tile && !state.drawn.has(address)) drawTile(network, address, answers[i].tile);
    });
    const keep = new Set(wanted);
    for (const [address, drawn] of state.drawn) {
      if (keep.has(address)) continue;
      for (const group of drawn.groups) group.remove();
      state.drawn.delete(address);
    }
    state.named = [...state.drawn.values()].flatMap((drawn) => drawn.named);
    const omitted = new Set([...state.drawn.values()].flatMap((drawn) => drawn.tile.omitted));
    const hint = $("zoom-hint");
    hint.textContent = problem
      ? problem.error
      : omitted.size
        ? `Zoom in to see all streets (not drawn at this scale: ${[...omitted].join(", ")}).`
        : "";
    hint.hidden = !hint.textContent;
    if (problem && problem.retry) {
      clearTimeout(state.tileTimer);
      state.tileTimer = setTimeout(loadTiles, problem.retry * 1000);
    }
  }

  // One tile's water, parks and streets, each in its layer (areas under every street).
  function drawTile(network, address, tile) {
    const [originLat, originLon] = tile.origin;
    const nodes = tile.nodes;
    const points = [];
    for (let i = 0; i < nodes.length; i += 2) {
      points.push(project(originLat + nodes[i] * tile.unit, originLon + nodes[i + 1] * tile.unit));
    }
    const areas = svg("g", { "data-tile": address }, $("area-layer"));
    const roads = svg("g", { "data-tile": address }, $("road-layer"));
    const named = [];
    for (const kind of AREA_KINDS) {
      const rings = tile[kind] || [];
      if (!rings.length) continue;
      const parts = rings.map((ring) => {
        const corners = [];
        for (let i = 0; i < ring.length; i += 2) {
          const [x, y] = project(originLat + ring[i] * tile.unit, originLon + ring[i + 1] * tile.unit);
          corners.push(`${i === 0 ? "M" : "L"}${x.toFixed(1)} ${y.toFixed(1)}`);
        }
        return `${corners.join("")}Z`;
      });
      svg("path", { class: `area ${kind}`, d: parts.join(""), "data-network": network.name }, areas);
    }
    for (const roadClass of ROAD_CLASSES) {
      const pairs = tile.roads[roadClass];
      if (!pairs) continue;
      const edgeNames = (tile.road_names || {})[roadClass] || [];
      const parts = [];
      for (let i = 0; i < pairs.length; i += 2) {
        const [x1, y1] = points[pairs[i]];
        const [x2, y2] = points[pairs[i + 1]];
        parts.push(`M${x1.toFixed(1)} ${y1.toFixed(1)}L${x2.toFixed(1)} ${y2.toFixed(1)}`);
        const name = tile.names[edgeNames[i / 2]];
        if (name) named.push([x1, y1, x2, y2, name]);
      }
      svg(
        "path",
        {
          class: `road ${roadClass}`,
          d: parts.join(""),
          "vector-effect": "non-scaling-stroke",
          "data-network": network.name,
        },
        roads,
      );
    }
    state.drawn.set(address, { tile, groups: [areas, roads], named });
  }

  // The network's outline, and no tiles yet: `loadTiles` brings those in view.
  function drawNetworks() {
    for (const id of ["bounds-layer", "area-layer", "road-layer"]) $(id).replaceChildren();
    state.drawn.clear();
    state.named = [];
    const network = state.view;
    const [south, west, north, east] = network.bounds;
    const [x0, y0] = project(north, west);
    const [x1, y1] = project(south, east);
    svg("rect", { class: "bounds", x: x0, y: y0, width: x1 - x0, height: y1 - y0 }, $("bounds-layer"));
  }

  // The map's SVG coordinates under a client (screen) position.
  function svgPoint(clientX, clientY) {
    const point = map.createSVGPoint();
    point.x = clientX;
    point.y = clientY;
    return point.matrixTransform(map.getScreenCTM().inverse());
  }

  // A pixel size on screen in map units, so markers keep their size when zooming.
  function pixels(n) {
    const matrix = map.getScreenCTM();
    return matrix ? n / matrix.a : n;
  }

  // The name of the street nearest to a map point, if one is within `within` map units.
  function streetNameAt(point, within) {
    let best = null;
    let bestDistance = within * within;
    for (const [x1, y1, x2, y2, name] of state.named) {
      const dx = x2 - x1;
      const dy = y2 - y1;
      const length = dx * dx + dy * dy;
      const t = length ? Math.max(0, Math.min(1, ((point.x - x1) * dx + (point.y - y1) * dy) / length)) : 0;
      const ex = x1 + t * dx - point.x;
      const ey = y1 + t * dy - point.y;
      const distance = ex * ex + ey * ey;
      if (distance <= bestDistance) {
        bestDistance = distance;
        best = name;
      }
    }
    return best;
  }

  function showStreetName(event) {
    const tip = $("street-name");
    const name = state.view ? streetNameAt(svgPoint(event.clientX, event.clientY), pixels(NAME_WITHIN_PX)) : null;
    if (!name) {
      tip.hidden = true;
      return;
    }
    const frame = $("map-frame").getBoundingClientRect();
    tip.textContent = name;
    tip.style.left = `${event.clientX - frame.left}px`;
    tip.style.top = `${event.clientY - frame.top}px`;
    tip.hidden = false;
  }

  function drawMarkers() {
    const layer = $("marker-layer");
    layer.replaceChildren();
    for (const kind of ["forecast", "start", "end"]) {
      const point = kind === "forecast" ? state.forecastPoint : state[kind];
      if (!point) continue;
      const [x, y] = project(point.lat, point.lon);
      // Drawn in screen pixels (scaled by one pixel's map units), so zooming keeps its size.
      const marker = svg(
        "g",
        { class: `marker ${kind}`, transform: `translate(${x} ${y}) scale(${pixels(1)})` },
        layer,
      );
      svg("path", { d: kind === "forecast" ? DIAMOND : PIN }, marker);
      if (kind !== "forecast") {
        svg("text", { x: 0, y: -14.5, "text-anchor": "middle" }, marker).textContent =
          kind === "start" ? "A" : "B";
      }
    }
  }

  function drawRoutes() {
    const layer = $("route-layer");
    layer.replaceChildren();
    // The air layer (air.js) draws the selected route again in its colours at its hour.
    document.dispatchEvent(new CustomEvent("cleanair:routes"));
    if (!state.plan) return;
    const order = state.plan.routes.map((_, index) => index).filter((i) => i !== state.selected);
    order.push(state.selected); // the selected route on top
    for (const index of order) {
      const route = state.plan.routes[index];
      const selected = index === state.selected;
      const group = svg(
        "g",
        { class: `route ${selected ? "selected" : "other"}`, "data-index": index },
        layer,
      );
      const points = route.waypoints.map(([lat, lon]) => project(lat, lon));
      const scores = (route.measures && route.measures.clean_air_score) || [];
      if (selected) {
        const casing = points.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" ");
        svg(
          "polyline",
          {
            class: "casing",
            points: casing,
            fill: "none",
            "stroke-width": 9,
            "stroke-linejoin": "round",
            "vector-effect": "non-scaling-stroke",
          },
          group,
        );
      }
      for (let i = 0; i + 1 < points.length; i += 1) {
        const a = scores[i];
        const b = scores[i + 1];
        const score = a === null || a === undefined ? b : b === null || b === undefined ? a : (a + b) / 2;
        svg(
          "line",
          {
            x1: points[i][0].toFixed(1),
            y1: points[i][1].toFixed(1),
            x2: points[i + 1][0].toFixed(1),
            y2: points[i + 1][1].toFixed(1),
            stroke: scoreColour(score),
            "stroke-width": selected ? 6 : 4,
            "vector-effect": "non-scaling-stroke",
          },
          group,
        );
      }
    }
  }

  function redraw() {
    drawRoutes();
    drawMarkers();
  }

  // Zoom with the wheel about the cursor, pan by dragging; a click without a drag picks.
  function attachMapInput() {
    let drag = null;
    map.addEventListener("pointerleave", () => {
      $("street-name").hidden = true;
    });
    map.addEventListener("pointerdown", (event) => {
      drag = { x: event.clientX, y: event.clientY, box: state.viewBox.slice(), moved: false };
      map.setPointerCapture(event.pointerId);
    });
    map.addEventListener("pointermove", (event) => {
      if (!drag) {
        showStreetName(event);
        return;
      }
      $("street-name").hidden = true;
      const dx = event.clientX - drag.x;
      const dy = event.clientY - drag.y;
      if (!drag.moved && Math.hypot(dx, dy) < 4) return;
      drag.moved = true;
      map.classList.add("dragging");
      const perPixel = pixels(1);
      setViewBox([drag.box[0] - dx * perPixel, drag.box[1] - dy * perPixel, drag.box[2], drag.box[3]]);
    });
    map.addEventListener("pointerup", (event) => {
      const finished = drag;
      drag = null;
      map.classList.remove("dragging");
      if (finished && !finished.moved && state.view) pick(svgPoint(event.clientX, event.clientY));
    });
    map.addEventListener(
      "wheel",
      (event) => {
        event.preventDefault();
        const at = svgPoint(event.clientX, event.clientY);
        const factor = Math.exp(Math.sign(event.deltaY) * 0.18);
        const [x, y, w, h] = state.viewBox;
        setViewBox([at.x - (at.x - x) * factor, at.y - (at.y - y) * factor, w * factor, h * factor]);
        drawMarkers();
      },
      { passive: false },
    );
  }

  function pick(point) {
    const chosen = unproject(point.x, point.y);
    const mode = document.querySelector('input[name="pick"]:checked').value;
    if (mode === "start") {
      state.start = chosen;
      $("start-point").textContent = formatPoint(chosen);
      setPickMode("end");
    } else if (mode === "end") {
      state.end = chosen;
      $("end-point").textContent = formatPoint(chosen);
    } else {
      state.forecastPoint = chosen;
      $("forecast-point").textContent = formatPoint(chosen);
    }
    drawMarkers();
  }

  function setPickMode(mode) {
    document.querySelector(`input[name="pick"][value="${mode}"]`).checked = true;
  }

  // -- planning -----------------------------------------------------------------------------

  async function submitPlan() {
    showError("error", "");
    if (!token()) return showError("error", "Paste a token first.");
    if (!state.start || !state.end) return showError("error", "Pick a start and an end on the map.");
    const leaving = startTime();
    if (leaving === undefined) return showError("error", "The start time is not a valid date and time.");
    const run = ++state.run;
    // The routes shown stay until new ones come: an error must not take them away.
    $("plan").disabled = true;
    $("status").textContent = "Submitting the plan…";
    try {
      const submitted = await api("POST", "/v1/routes", {
        start: { latitude: state.start.lat, longitude: state.start.lon },
        end: { latitude: state.end.lat, longitude: state.end.lon },
        activity_type: $("activity").value,
        // Left out for now: the service takes its own clock's now.
        ...(leaving ? { start_time: leaving.toISOString() } : {}),
      });
      if (run !== state.run) return;
      showCredits();
      if (submitted.status !== 202) {
        $("status").textContent = "";
        return showError("error", explainKeeping(explain(submitted)));
      }
      await poll(submitted.body.request_id, run, leaving);
    } finally {
      if (run === state.run) $("plan").disabled = false;
    }
  }

  // The start time the control holds (the browser's local time): null when empty (now),
  // undefined when it does not read as a time.
  function startTime() {
    const value = $("start-time").value;
    if (!value) return null;
    const at = new Date(value); // a date-time without a zone reads as local time
    return Number.isNaN(at.getTime()) ? undefined : at;
  }

  // A Date as the control's value: local YYYY-MM-DDTHH:MM.
  function controlValue(date) {
    const two = (n) => String(n).padStart(2, "0");
    return `${date.getFullYear()}-${two(date.getMonth() + 1)}-${two(date.getDate())}` +
      `T${two(date.getHours())}:${two(date.getMinutes())}`;
  }

  // The first BUSY_HOUR:00 after `start`: its own day's when still ahead, else the next day's.
  function busyHourAfter(start) {
    const at = new Date(start.getTime());
    at.setHours(BUSY_HOUR, 0, 0, 0);
    if (at <= start) at.setDate(at.getDate() + 1);
    return at;
  }

  function isNight(date) {
    const hour = date.getHours();
    return hour >= NIGHT_FROM || hour < NIGHT_UNTIL;
  }

  async function poll(requestId, run, leaving) {
    let wait = POLL_EVERY_MS;
    let polls = 0;
    let limited = ""; // why the page waits longer than usual, shown while it waits
    for (;;) {
      $("status").textContent = limited || `Planning (request ${requestId}); polls so far: ${polls}.`;
      await delay(wait);
      if (run !== state.run) return;
      const answer = await api("GET", `/v1/routes/${encodeURIComponent(requestId)}`);
      if (run !== state.run) return;
      polls += 1;
      if (answer.status === 429) {
        // Wait as long as the service asks, and at least the usual interval.
        wait = Math.max(POLL_EVERY_MS, (answer.retryAfter ?? 1) * 1000);
        limited = `Polling too fast: waiting ${Math.round(wait / 1000)} s.`;
        continue;
      }
      limited = "";
      if (!answer.ok) {
        $("status").textContent = "";
        return showError("error", explainKeeping(explain(answer)));
      }
      const { status, result, error } = answer.body;
      if (status === "pending") {
        wait = POLL_EVERY_MS;
        continue;
      }
      if (status === "failed") {
        $("status").textContent = "";
        return showError("error", explainKeeping(`The plan was rejected: ${error || "no reason given"}.`));
      }
      $("status").textContent = leaving
        ? `Planned: ${result.routes.length} route(s), leaving ${atWords(leaving)}.`
        : `Planned: ${result.routes.length} route(s).`;
      state.plan = result;
      state.planStart = leaving || new Date();
      state.selected = result.best_route_index || 0;
      showPlan();
      showAirSource(state.start);
      return;
    }
  }

  // An error's words, saying the routes of the last plan are still those shown.
  function explainKeeping(message) {
    return state.plan ? `${message} The routes shown are from the previous plan.` : message;
  }

  function showPlan() {
    const result = state.plan;
    const baseline = [`Direct route ${formatDistance(result.original_distance)}`];
    if (result.original_clean_air_score !== null && result.original_clean_air_score !== undefined) {
      baseline.push(`score ${result.original_clean_air_score.toFixed(0)}`);
    }
    if (result.original_dose !== null && result.original_dose !== undefined) {
      baseline.push(`relative dose ${result.original_dose.toFixed(2)}`);
    }
    $("baseline").textContent = `${baseline.join(", ")}.`;
    // Only the direct route: the planner proved no cleaner one within the detour limit.
    const onlyDirect = result.routes.length === 1 && !result.routes[0].distance_delta;
    $("verdict").textContent = onlyDirect
      ? `The direct route is the cleanest: no route up to ${MAX_DETOUR_PCT} % longer has less dose.`
      : "";
    $("verdict").hidden = !onlyDirect;
    showAdvice(onlyDirect);
    const list = $("routes");
    list.replaceChildren();
    result.routes.forEach((route, index) => {
      const item = html("li");
      item.dataset.index = String(index);
      const banded = route.summary && route.summary.clean_air_score;
      if (banded) item.style.setProperty("--band", banded.colour);
      const title = html("div", route.goal.title, "goal");
      if (index === result.best_route_index) title.append(" ", html("span", "lowest dose", "best"));
      item.append(title, html("div", route.goal.description, "description"));
      const figures = html("div", undefined, "figures");
      figures.append(
        html("span", `Distance ${formatDistance(route.distance)} (${formatSigned(route.distance_delta, "m")})`, "distance"),
        html("span", `Duration ${formatDuration(route.duration)}`, "duration"),
        html(
          "span",
          route.dose_delta_pct === null || route.dose_delta_pct === undefined
            ? "Dose change: no baseline"
            : `Dose ${formatSigned(-route.dose_delta_pct, "%")} vs direct`,
          "dose",
        ),
      );
      if (banded) {
        figures.append(html("span", `Score ${banded.score.toFixed(0)} (${banded.description})`, "score"));
      }
      item.append(figures);
      item.addEventListener("click", () => {
        state.selected = index;
        markSelected();
        drawRoutes();
      });
      list.appendChild(item);
    });
    markSelected();
    redraw();
  }

  // At night, or when no cleaner route exists, why in one sentence, and the busiest hour to
  // try instead (a button planning it).
  function showAdvice(onlyDirect) {
    const start = state.planStart;
    const night = isNight(start);
    const busy = start.getHours() === BUSY_HOUR && start.getMinutes() === 0;
    $("advice").hidden = !(onlyDirect || night);
    if ($("advice").hidden) return;
    const when = atWords(start);
    $("advice-text").textContent = night && onlyDirect
      ? `Leaving ${when}, at night, traffic is light, so the air differs little from street to street and no detour pays; streets differ most at the morning rush hour.`
      : night
        ? `Leaving ${when}, at night, traffic is light, so the air differs less from street to street than by day; streets differ most at the morning rush hour.`
        : busy
          ? "Even at the morning rush hour the air differs too little between the streets of this trip for a detour to pay."
          : `Leaving ${when}, the air differs too little between the streets of this trip for a detour to pay; streets differ most at the morning rush hour.`;
    const button = $("try-busy");
    button.hidden = busy;
    const next = busyHourAfter(start);
    button.dataset.start = controlValue(next);
    button.textContent = `Plan for ${dayClock(next)} (25 credits)`;
  }

  function markSelected() {
    for (const item of $("routes").children) {
      item.classList.toggle("selected", Number(item.dataset.index) === state.selected);
    }
  }

  // -- forecast -----------------------------------------------------------------------------

  async function showForecast() {
    showError("forecast-error", "");
    if (!token()) return showError("forecast-error", "Paste a token first.");
    const point = state.forecastPoint || state.start;
    if (!point) {
      return showError("forecast-error", "Pick a forecast point (or a start) on the map.");
    }
    $("forecast").disabled = true;
    $("forecast-status").textContent = "Asking for the forecast…";
    try {
      const answer = await api("POST", "/v1/airquality/forecast", {
        latitude: point.lat,
        longitude: point.lon,
        date: $("forecast-date").value || today(),
        timezone: timeZone(),
      });
      $("forecast-status").textContent = "";
      showCredits();
      if (!answer.ok) return showError("forecast-error", explain(answer));
      showAirSource(point);
      state.forecast = answer.body;
      offerMeasures(answer.body.measures || {});
      drawChart();
      $("forecast-status").textContent = `Forecast for ${answer.body.location}.`;
    } finally {
      $("forecast").disabled = false;
    }
  }

  async function showScore() {
    showError("forecast-error", "");
    $("score-result").textContent = "";
    if (!token()) return showError("forecast-error", "Paste a token first.");
    const point = state.forecastPoint || state.start;
    if (!point) {
      return showError("forecast-error", "Pick a forecast point (or a start) on the map.");
    }
    $("score").disabled = true;
    try {
      const answer = await api("POST", "/v1/airquality/score", { lat: point.lat, lon: point.lon });
      showCredits();
      if (!answer.ok) return showError("forecast-error", explain(answer));
      showAirSource(point);
      $("score-result").textContent =
        `Clean Air Score now: ${answer.body.score} of 100 at ${formatPoint(point)}.`;
    } finally {
      $("score").disabled = false;
    }
  }

  function offerMeasures(measures) {
    const select = $("measure");
    const current = select.value;
    select.replaceChildren();
    for (const name of Object.keys(measures)) {
      const option = html("option", name);
      option.value = name;
      select.appendChild(option);
    }
    if (Object.hasOwn(measures, current)) select.value = current;
  }

  function drawChart() {
    const chart = $("chart");
    chart.replaceChildren();
    const forecast = state.forecast;
    if (!forecast) return;
    const measure = $("measure").value;
    const times = forecast.timestamps || [];
    const values = (forecast.measures || {})[measure] || [];
    const [width, height] = [420, 200];
    const left = 36;
    const right = 10;
    const top = 22;
    const bottom = 26;
    const known = values.filter((v) => v !== null && v !== undefined);
    const isScore = measure === "clean_air_score";
    const unit = isScore ? "" : " µg/m³";
    svg("text", { class: "title", x: left, y: 14 }, chart).textContent =
      `${measure}${unit} at ${forecast.location}`;
    if (!times.length || !known.length) {
      svg("text", { x: left, y: height / 2 }, chart).textContent = "No values for this measure.";
      return;
    }
    const high = isScore ? 100 : Math.max(...known) * 1.1 || 1;
    const x = (i) => left + (times.length === 1 ? 0 : (i / (times.length - 1)) * (width - left - right));
    const y = (v) => top + (1 - v / high) * (height - top - bottom);
    for (let k = 0; k <= 4; k += 1) {
      const value = (high * k) / 4;
      svg("line", { class: "grid", x1: left, x2: width - right, y1: y(value), y2: y(value) }, chart);
      const label = svg("text", { x: left - 4, y: y(value) + 3, "text-anchor": "end" }, chart);
      label.textContent = Number.isInteger(value) || value >= 10 ? value.toFixed(0) : value.toFixed(1);
    }
    svg("line", { class: "axis", x1: left, x2: width - right, y1: height - bottom, y2: height - bottom }, chart);
    const hour = new Intl.DateTimeFormat("en-GB", { hour: "2-digit", minute: "2-digit", timeZone: timeZone() });
    const step = Math.max(1, Math.ceil(times.length / 8));
    for (let i = 0; i < times.length; i += step) {
      const label = svg("text", { x: x(i), y: height - bottom + 14, "text-anchor": "middle" }, chart);
      label.textContent = hour.format(new Date(times[i] * 1000));
    }
    // One polyline per run of hours with values: a null hour is a gap, not a zero.
    let run = [];
    const flush = () => {
      if (run.length > 1) svg("polyline", { class: "series", points: run.join(" ") }, chart);
      run = [];
    };
    values.forEach((value, i) => {
      if (value === null || value === undefined) return flush();
      run.push(`${x(i).toFixed(1)},${y(value).toFixed(1)}`);
      const dot = svg("circle", { cx: x(i), cy: y(value), r: 2.2 }, chart);
      svg("title", {}, dot).textContent = `${hour.format(new Date(times[i] * 1000))}: ${value}${unit}`;
    });
    flush();
  }

  // -- start ---------------------------------------------------------------------------------

  async function loadNetworks() {
    let response;
    try {
      response = await fetch("/explore/networks", { credentials: "omit" });
    } catch (error) {
      return showError("error", `The street networks could not be loaded (${error}).`);
    }
    if (!response.ok) {
      return showError("error", `The street networks could not be loaded (${response.status}).`);
    }
    // The list only (names, bounds, where the tiles are): the streets come as tiles.
    state.networks = (await response.json()).networks;
    if (!state.networks.length) {
      $("network-info").textContent = "No street network is loaded: plans will be rejected.";
      return;
    }
    const select = $("network");
    for (const network of state.networks) {
      const option = html("option", network.name);
      option.value = network.name;
      select.appendChild(option);
    }
    $("network-choice").hidden = state.networks.length < 2;
    const first = state.networks.find((n) => n.name === SHIPPED_NETWORK) || state.networks[0];
    select.value = first.name;
    showNetwork(first);
    select.addEventListener("change", () => {
      showNetwork(state.networks.find((n) => n.name === select.value));
    });
  }

  function showNetwork(network) {
    state.view = network;
    $("network-info").textContent = `${network.name}: ${network.bounds.map((v) => v.toFixed(4)).join(", ")}`;
    fitView(network);
    drawNetworks();
    loadTiles();
    redraw();
    const [south, west, north, east] = network.bounds;
    showAirSource({ lat: (south + north) / 2, lon: (west + east) / 2 });
  }

  function init() {
    const networkLayer = svg("g", { id: "network-layer" }, map);
    // The air layer (air.js) between the areas and the streets: the streets stay readable on it.
    for (const id of ["bounds-layer", "area-layer", "air-layer", "road-layer"]) svg("g", { id }, networkLayer);
    for (const id of ["route-layer", "marker-layer"]) svg("g", { id }, map);
    const input = $("token");
    input.value = sessionStorage.getItem(TOKEN_KEY) || "";
    input.addEventListener("input", () => keepToken(token()));
    $("forget-token").addEventListener("click", () => {
      keepToken("");
      $("credits").textContent = "";
      $("pairing-status").textContent = "";
    });
    $("pair").addEventListener("click", pair);
    $("pairing-code").addEventListener("keydown", (event) => {
      if (event.key === "Enter") pair();
    });
    $("start-now").addEventListener("click", () => {
      $("start-time").value = "";
    });
    $("try-busy").addEventListener("click", () => {
      $("start-time").value = $("try-busy").dataset.start;
      submitPlan();
    });
    input.addEventListener("change", showCredits);
    showCredits();
    $("plan").addEventListener("click", submitPlan);
    $("forecast").addEventListener("click", showForecast);
    $("score").addEventListener("click", showScore);
    $("measure").addEventListener("change", drawChart);
    $("reset-view").addEventListener("click", () => {
      if (state.view) fitView(state.view);
      drawMarkers();
    });
    $("forecast-date").value = today();
    attachMapInput();
    window.addEventListener("resize", () => {
      drawMarkers();
      drawScale();
    });
    loadNetworks();
  }

  // For the page's other scripts (conditions.js, departures.js and alerts.js: one way to call the API
  // and to word an answer or a wait, so the page reads alike everywhere), automation and the browser tests (where on screen
  // a point of the map is drawn).
  window.cleanairExplore = {
    api,
    atWords,
    dayClock,
    dayWord,
    explain,
    retryWords,
    showCredits,
    timeZone,
    token,
    // The trip the map's clicks set: the departure chart (departures.js) plans it.
    trip: () => ({ start: state.start, end: state.end, activity: $("activity").value }),
    // The place the forecast panel asks about (the forecast point, else the start) and the
    // Leaving field's value ("" or YYYY-MM-DDTHH:MM, local): the alerts panel subscribes
    // to them.
    place: () => state.forecastPoint || state.start,
    leaving: () => $("start-time").value,
    // The map's projection and view, for the air layer (air.js): null before a network shows.
    project: (lat, lon) => (state.view ? project(lat, lon) : null),
    unproject: (x, y) => (state.view ? unproject(x, y) : null),
    viewBox: () => (state.view && state.viewBox ? [...state.viewBox] : null),
    unitsPerPixel: () => pixels(1),
    // The selected route's waypoints ([lat, lon] pairs), or null before a plan.
    selectedRoute: () => (state.plan ? state.plan.routes[state.selected].waypoints : null),
    svg,
    screenPoint(lat, lon) {
      const [x, y] = project(lat, lon);
      const point = map.createSVGPoint();
      point.x = x;
      point.y = y;
      const screen = point.matrixTransform(map.getScreenCTM());
      return { x: screen.x, y: screen.y };
    },
  };

  init();
})();
