// The explorer's air layer (issue 33): heatmap tiles of the air,
// GET /ext/v1/airquality/tiles/{layer}/{z}/{x}/{y}.png?time=...&palette=..., drawn under the
// streets, with a legend in the layer's own colours (GET /explore/air-layers, the core's
// palettes), a colour-blind-safe palette, and a time slider over the hours the endpoint
// serves, with a play button. The tiles need the token in an Authorization header, which an
// <img> cannot send: they are fetched, kept as blob URLs (by URL) and drawn as SVG <image>s
// placed at each tile's bounds in the explorer's projection (docs/explore.md).
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const explore = window.cleanairExplore;
  // A tile drawn about its own size on screen: its pixels stay sharp and a view needs few.
  const TILE_SCREEN_PX = 256;
  // At most this many tiles for a resting view (about 24 fill a wide map), and for an hour
  // while playing: a played hour every PLAY_EVERY_MS then spends at most
  // 8 x 60 / 1.2 = 400 requests a minute, under the connection's 600 (docs/explore.md).
  const MAX_TILES = 30;
  const MAX_PLAY_TILES = 8;
  const PLAY_EVERY_MS = 1200;
  // Blob URLs kept (tiles of other hours, layers or places): going back shows them at once.
  const KEEP_TILES = 240;
  const EARTH_M = 40_075_016.686;
  // A map unit is 1e-5 degrees of latitude (explore.js's projection).
  const METRES_PER_UNIT = 1.1132;
  const MAX_LATITUDE = 85.0511;
  const HOUR_MS = 3_600_000;

  const state = {
    config: null, // the /explore/air-layers answer
    base: 0, // the hour (ms) the slider's 0 is: the current hour when it was last set up
    tiles: new Map(), // URL -> Promise of {blob} or {error}, least recently used first
    run: 0, // bumps on every redraw: a stale load draws nothing
    playing: false,
    best: null, // the best departure's start (ms), from departures.js
    shown: [], // the drawn tiles: [{tile, blob}]
    pixels: new Map(), // blob URL -> its ImageData, for the route's colours
  };

  // -- the slider's hours -------------------------------------------------------------------

  function currentHour() {
    return Math.floor(Date.now() / HOUR_MS) * HOUR_MS;
  }

  // The slider holds hours from now (0 the current hour). Its least is one hour short of the
  // 30 days: that hour's start is just outside the window the endpoint serves.
  function setUpSlider() {
    const slider = $("air-hour");
    const { past_hours: past, ahead_hours: ahead } = state.config;
    const chosen = state.base ? selectedHour() : currentHour();
    state.base = currentHour();
    slider.min = String(1 - past);
    slider.max = String(ahead);
    slider.value = String(Math.round((chosen - state.base) / HOUR_MS));
    markBest();
  }

  // The hour chosen (ms); the slider moves on with the clock when the hour has turned.
  function selectedHour() {
    return state.base + Number($("air-hour").value) * HOUR_MS;
  }

  function rebase() {
    if (state.config && currentHour() !== state.base) setUpSlider();
  }

  function showWhen() {
    const hour = selectedHour();
    const offset = Math.round((hour - currentHour()) / HOUR_MS);
    const from = offset === 0 ? "now" : offset > 0 ? `in ${offset} h` : `${-offset} h ago`;
    const words = `${explore.dayClock(new Date(hour))} (${explore.timeZone()}), ${from}`;
    $("air-when").textContent = words;
    $("air-hour").setAttribute("aria-valuetext", words); // a screen reader says the hour
  }

  function markBest() {
    const marks = $("air-marks");
    marks.replaceChildren();
    const button = $("air-best");
    const offset = state.best === null ? null : Math.floor((state.best - state.base) / HOUR_MS);
    const slider = $("air-hour");
    if (offset === null || offset < Number(slider.min) || offset > Number(slider.max)) {
      button.hidden = true;
      return;
    }
    const option = document.createElement("option");
    option.value = String(offset);
    option.label = "best departure";
    marks.append(option);
    button.dataset.offset = String(offset);
    button.textContent = `Best departure: ${explore.dayClock(new Date(state.best))}`;
    button.hidden = false;
  }

  // -- which tiles ---------------------------------------------------------------------------

  function clampLat(lat) {
    return Math.max(-MAX_LATITUDE, Math.min(MAX_LATITUDE, lat));
  }

  function tileX(lon, z) {
    return Math.min(2 ** z - 1, Math.max(0, Math.floor(((lon + 180) / 360) * 2 ** z)));
  }

  function tileY(lat, z) {
    const r = (clampLat(lat) * Math.PI) / 180;
    const y = Math.floor(((1 - Math.asinh(Math.tan(r)) / Math.PI) / 2) * 2 ** z);
    return Math.min(2 ** z - 1, Math.max(0, y));
  }

  function lonOf(x, z) {
    return (x / 2 ** z) * 360 - 180;
  }

  function latOf(y, z) {
    return (Math.atan(Math.sinh(Math.PI * (1 - (2 * y) / 2 ** z))) * 180) / Math.PI;
  }

  // The map area on screen in map units: wider or taller than the view box when the map's
  // shape differs from it (the SVG shows the whole box, centred).
  function visibleBox() {
    const map = $("map");
    const matrix = map.getScreenCTM();
    if (!explore.viewBox() || !matrix) return null;
    const rect = map.getBoundingClientRect();
    const inverse = matrix.inverse();
    const point = map.createSVGPoint();
    point.x = rect.left;
    point.y = rect.top;
    const top = point.matrixTransform(inverse);
    point.x = rect.right;
    point.y = rect.bottom;
    const bottom = point.matrixTransform(inverse);
    return [top.x, top.y, bottom.x - top.x, bottom.y - top.y];
  }

  // The tiles covering the view, at the zoom whose tiles are about TILE_SCREEN_PX wide on
  // screen, a coarser one when that would take more than `most`.
  function tilesInView(most) {
    const box = visibleBox();
    if (!box) return [];
    const [x, y, w, h] = box;
    const corner = explore.unproject(x, y);
    const far = explore.unproject(x + w, y + h);
    const [north, south] = [clampLat(corner.lat), clampLat(far.lat)];
    const [west, east] = [Math.max(-180, corner.lon), Math.min(180, far.lon)];
    if (south >= north || west >= east) return [];
    const metresPerPixel = explore.unitsPerPixel() * METRES_PER_UNIT;
    const cosine = Math.cos((((south + north) / 2) * Math.PI) / 180);
    const fits = Math.round(Math.log2((EARTH_M * cosine) / (TILE_SCREEN_PX * metresPerPixel)));
    let z = Math.max(0, Math.min(state.config.max_zoom, Number.isFinite(fits) ? fits : 0));
    for (;;) {
      const [x0, x1, y0, y1] = [tileX(west, z), tileX(east, z), tileY(north, z), tileY(south, z)];
      if ((x1 - x0 + 1) * (y1 - y0 + 1) <= most || z === 0) {
        const found = [];
        for (let tx = x0; tx <= x1; tx += 1) {
          for (let ty = y0; ty <= y1; ty += 1) found.push({ z, x: tx, y: ty });
        }
        return found;
      }
      z -= 1;
    }
  }

  function urlOf(tile, layer, hour, palette) {
    const path = state.config.tiles
      .replace("{layer}", layer)
      .replace("{z}", tile.z)
      .replace("{x}", tile.x)
      .replace("{y}", tile.y);
    const time = new Date(hour).toISOString().replace(".000Z", "Z");
    return `${path}?time=${encodeURIComponent(time)}&palette=${palette}`;
  }

  // -- fetching ------------------------------------------------------------------------------

  // One tile as a blob URL, fetched once per URL (a tile's URL names its layer, place, hour
  // and palette); the browser's cache revalidates with the ETag. A refused tile is not kept.
  function fetchTile(url) {
    const kept = state.tiles.get(url);
    if (kept) {
      state.tiles.delete(url);
      state.tiles.set(url, kept);
      return kept;
    }
    const loading = load(url);
    state.tiles.set(url, loading);
    loading.then((answer) => {
      if (answer.error && state.tiles.get(url) === loading) state.tiles.delete(url);
    });
    return loading;
  }

  async function load(url) {
    let response;
    try {
      response = await fetch(url, {
        headers: { Authorization: `Bearer ${explore.token()}`, Accept: "image/png" },
        credentials: "omit",
      });
    } catch (error) {
      return { error: explore.explain({ status: 0, network: String(error) }) };
    }
    if (!response.ok) {
      let body = null;
      try {
        body = await response.json();
      } catch (error) {
        body = null;
      }
      const retry = Number.parseInt(response.headers.get("Retry-After") || "", 10);
      const retryAfter = Number.isFinite(retry) ? retry : null;
      return { error: explore.explain({ status: response.status, body, retryAfter }) };
    }
    return { blob: URL.createObjectURL(await response.blob()) };
  }

  // Drop the least recently used tiles beyond KEEP_TILES (never one drawn: those were just
  // used), revoking their blob URLs so the browser frees the images.
  function forget() {
    while (state.tiles.size > KEEP_TILES) {
      const [url, loading] = state.tiles.entries().next().value;
      state.tiles.delete(url);
      loading.then((answer) => {
        if (!answer.blob) return;
        URL.revokeObjectURL(answer.blob);
        state.pixels.delete(answer.blob);
      });
    }
  }

  // -- drawing -------------------------------------------------------------------------------

  function chosen() {
    return {
      layer: $("air-layer-choice").value,
      palette: $("air-colorblind").checked ? "colorblind" : "default",
    };
  }

  function status(message) {
    $("air-status").textContent = message;
  }

  // Draw the chosen layer at the slider's hour over the view. The new tiles are drawn in a
  // group of their own that replaces the old one once its images are decoded, so the map
  // never flashes empty between hours. Resolves once drawn (or found stale).
  async function draw() {
    const run = ++state.run;
    const { layer, palette } = chosen();
    const group = $("air-layer");
    if (!layer || !state.config) {
      group.replaceChildren();
      state.shown = [];
      paintRoute();
      status("");
      return;
    }
    if (!explore.token()) {
      group.replaceChildren();
      state.shown = [];
      paintRoute();
      status("Pair or paste a token to see the air: tiles are read with it.");
      return;
    }
    rebase();
    showWhen();
    const hour = selectedHour();
    const wanted = tilesInView(state.playing ? MAX_PLAY_TILES : MAX_TILES);
    const urls = wanted.map((tile) => urlOf(tile, layer, hour, palette));
    const answers = await Promise.all(urls.map(fetchTile));
    if (run !== state.run) return;
    const fresh = explore.svg("g", {
      class: "air-tiles",
      "data-layer": layer,
      "data-palette": palette,
      "data-hour": new Date(hour).toISOString(),
    });
    const images = [];
    // Each tile a hair wider than its bounds: antialiased edges meeting at a fractional
    // pixel would show the map through as faint seams (the group's opacity is applied to
    // the tiles together, so the overlap draws no darker line).
    const seam = explore.unitsPerPixel() * 0.5;
    wanted.forEach((tile, i) => {
      if (!answers[i].blob) return;
      const [x0, y0] = explore.project(latOf(tile.y, tile.z), lonOf(tile.x, tile.z));
      const [x1, y1] = explore.project(latOf(tile.y + 1, tile.z), lonOf(tile.x + 1, tile.z));
      // Placed linearly between its corners: the explorer's projection is equirectangular,
      // Web Mercator's is not, but within a tile of zoom 11 or more (20 km or less) the two
      // differ by well under a pixel; coarser tiles only show a whole region's air.
      images.push(explore.svg("image", {
        href: answers[i].blob,
        x: x0,
        y: y0,
        width: x1 - x0 + seam,
        height: y1 - y0 + seam,
        preserveAspectRatio: "none",
        "data-url": urls[i],
      }, fresh));
    });
    await Promise.all(images.map((image) => (image.decode ? image.decode().catch(() => {}) : null)));
    if (run !== state.run) return;
    group.replaceChildren(fresh);
    state.shown = wanted.map((tile, i) => ({ tile, blob: answers[i].blob })).filter((t) => t.blob);
    forget();
    paintRoute();
    const problem = answers.find((answer) => answer.error);
    status(problem ? `The air could not be drawn: ${problem.error}` : "");
    if (problem) stop();
  }

  // -- the route in the layer's colours ----------------------------------------------------

  // A drawn tile's pixels, decoded once per blob URL (a blob: image never taints a canvas).
  async function pixelsOf(blob) {
    if (!state.pixels.has(blob)) {
      state.pixels.set(blob, (async () => {
        const image = new Image();
        image.src = blob;
        await image.decode();
        const canvas = document.createElement("canvas");
        canvas.width = image.naturalWidth;
        canvas.height = image.naturalHeight;
        const context = canvas.getContext("2d", { willReadFrequently: true });
        context.drawImage(image, 0, 0);
        return context.getImageData(0, 0, canvas.width, canvas.height);
      })().catch(() => null));
    }
    return state.pixels.get(blob);
  }

  // The drawn layer's colour at a point, "#RRGGBB", or null where no tile shows one.
  async function colourAt(lat, lon) {
    for (const { tile, blob } of state.shown) {
      const n = 2 ** tile.z;
      const fx = ((lon + 180) / 360) * n - tile.x;
      const r = (clampLat(lat) * Math.PI) / 180;
      const fy = ((1 - Math.asinh(Math.tan(r)) / Math.PI) / 2) * n - tile.y;
      if (fx < 0 || fx >= 1 || fy < 0 || fy >= 1) continue;
      const data = await pixelsOf(blob);
      if (!data) return null;
      const at = (Math.floor(fy * data.height) * data.width + Math.floor(fx * data.width)) * 4;
      if (data.data[at + 3] < 255) return null;
      const hex = (v) => v.toString(16).padStart(2, "0").toUpperCase();
      return `#${hex(data.data[at])}${hex(data.data[at + 1])}${hex(data.data[at + 2])}`;
    }
    return null;
  }

  // With a layer on, the selected route again over the plan's own drawing, each segment in
  // the layer's colour at its middle at the slider's hour (read from the tiles drawn, so
  // it costs nothing more): the route's air hour by hour as the slider moves or plays.
  async function paintRoute() {
    const run = state.run;
    const old = $("air-route");
    const route = explore.selectedRoute();
    if (!route || !state.shown.length) {
      if (old) old.remove();
      return;
    }
    const colours = [];
    for (let i = 0; i + 1 < route.length; i += 1) {
      const [a, b] = [route[i], route[i + 1]];
      colours.push(await colourAt((a[0] + b[0]) / 2, (a[1] + b[1]) / 2));
    }
    if (run !== state.run || explore.selectedRoute() !== route) return;
    const group = explore.svg("g", { id: "air-route", class: "air-route" });
    const points = route.map(([lat, lon]) => explore.project(lat, lon));
    colours.forEach((colour, i) => {
      if (!colour) return;
      explore.svg("line", {
        x1: points[i][0].toFixed(1),
        y1: points[i][1].toFixed(1),
        x2: points[i + 1][0].toFixed(1),
        y2: points[i + 1][1].toFixed(1),
        stroke: colour,
        "data-colour": colour,
        "vector-effect": "non-scaling-stroke",
      }, group);
    });
    if (old) old.remove();
    $("map").insertBefore(group, $("marker-layer"));
  }

  function showLegend() {
    const legend = $("air-legend");
    legend.replaceChildren();
    const { layer: name, palette } = chosen();
    const layer = state.config && state.config.layers.find((l) => l.name === name);
    legend.hidden = !layer;
    if (!layer) return;
    const title = document.createElement("p");
    title.className = "title";
    title.textContent = `${layer.title} (${layer.unit})`;
    legend.append(title);
    const list = document.createElement("ul");
    // A concentration's steps are ranges worth reading; an index's or the score's are named.
    const ranges = layer.unit === "µg/m³";
    for (const step of layer[palette]) {
      const item = document.createElement("li");
      item.dataset.colour = step.colour;
      const swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.backgroundColor = step.colour;
      item.append(swatch);
      let words = step.label;
      if (ranges) {
        const low = step.low === null ? 0 : step.low;
        const range = step.high === null ? `over ${low}` : `${low}–${step.high}`;
        words = `${range} ${layer.unit}: ${step.label}`;
      }
      item.append(words);
      list.append(item);
    }
    legend.append(list);
  }

  function showControls() {
    const on = Boolean($("air-layer-choice").value);
    $("air-time").hidden = !on;
    if (!on) stop();
    showLegend();
    draw();
  }

  // -- playing -------------------------------------------------------------------------------

  function stop() {
    state.playing = false;
    $("air-play").textContent = "▶";
    $("air-play").setAttribute("aria-label", "Play the air hour by hour");
  }

  // Hour after hour to the end of the forecast: each hour is drawn, then held PLAY_EVERY_MS.
  async function play() {
    if (state.playing) {
      stop();
      draw(); // the resting view's finer tiles
      return;
    }
    const slider = $("air-hour");
    if (Number(slider.value) >= Number(slider.max)) slider.value = "0";
    state.playing = true;
    $("air-play").textContent = "❚❚";
    $("air-play").setAttribute("aria-label", "Pause");
    while (state.playing) {
      await draw();
      await new Promise((resolve) => setTimeout(resolve, PLAY_EVERY_MS));
      if (!state.playing) break;
      if (Number(slider.value) >= Number(slider.max)) {
        stop();
        draw();
        break;
      }
      slider.value = String(Number(slider.value) + 1);
    }
  }

  // -- start ---------------------------------------------------------------------------------

  async function init() {
    let response;
    try {
      response = await fetch("/explore/air-layers", { credentials: "omit" });
    } catch (error) {
      status(`The air layers could not be loaded (${error}).`);
      return;
    }
    if (!response.ok) {
      status(`The air layers could not be loaded (${response.status}).`);
      return;
    }
    state.config = await response.json();
    const choice = $("air-layer-choice");
    for (const layer of state.config.layers) {
      const option = document.createElement("option");
      option.value = layer.name;
      option.textContent = layer.title;
      choice.append(option);
    }
    setUpSlider();
    choice.addEventListener("change", showControls);
    $("air-colorblind").addEventListener("change", () => {
      showLegend();
      draw();
    });
    $("air-hour").addEventListener("input", () => {
      showWhen();
      if (!state.playing) draw();
    });
    $("air-play").addEventListener("click", play);
    $("air-best").addEventListener("click", () => {
      stop();
      $("air-hour").value = $("air-best").dataset.offset;
      draw();
    });
    document.addEventListener("cleanair:routes", paintRoute);
    document.addEventListener("cleanair:view", () => {
      if (!state.playing) draw();
    });
    // A tile is the same picture whoever asks: the kept ones stay; refusals were not kept.
    document.addEventListener("cleanair:token", draw);
    document.addEventListener("cleanair:best-departure", (event) => {
      state.best = event.detail === null ? null : Date.parse(event.detail);
      markBest();
    });
    showWhen();
  }

  init();
})();
