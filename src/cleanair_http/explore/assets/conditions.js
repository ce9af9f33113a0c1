// The explorer's conditions panel: for the forecast point a person clicks, the official
// indexes (value, category on its colour, dominant pollutant), their health advice and where
// the values come from and how old they are (POST /ext/v1/airquality/conditions, 1 credit).
// Kept apart from explore.js, which it only watches: the point it asks for is the one
// explore.js writes into #forecast-point (docs/explore.md).
"use strict";

(() => {
  const PATH = "/ext/v1/airquality/conditions";
  const POLLUTANTS = { pm25: "PM2.5", pm10: "PM10", no2: "NO₂", o3: "O₃", so2: "SO₂", co: "CO" };
  const AVERAGING = {
    "1h": "1-hour mean",
    "8h": "8-hour mean",
    "24h": "24-hour mean",
    nowcast: "NowCast (recent hours weighted)",
  };
  const SOURCES = {
    "embedded-model": "the embedded model (modelled, not measured)",
    cams: "CAMS forecasts",
  };
  // The stations weighing most named in the source line; the rest are counted.
  const STATIONS_NAMED = 3;

  const $ = (id) => document.getElementById(id);
  let asked = 0; // bumps on every request: an answer to an older click is dropped

  function html(tag, text, className) {
    const element = document.createElement(tag);
    if (text !== undefined) element.textContent = text;
    if (className) element.className = className;
    return element;
  }

  // The API call, the token and the wording of a wait are explore.js's (loaded first).
  const { api: call, retryWords, token } = window.cleanairExplore;

  function explain(answer) {
    if (answer.status === 0) return `The service could not be reached (${answer.network}).`;
    const detail = answer.body && answer.body.detail ? String(answer.body.detail) : "";
    const said = detail ? `: ${detail}` : "";
    const wait = answer.retryAfter === null ? "" : ` Try again ${retryWords(answer.retryAfter)}.`;
    switch (answer.status) {
      case 401:
        return `The token was not accepted (401)${said}. Paste a valid token.`;
      case 402:
        return `No credits left (402)${said}.${wait}`;
      case 403:
        return `This token may not do that (403)${said}.`;
      case 422:
        return `The request was not valid (422)${said}.`;
      case 429:
        return `Too many requests or no credits left (429)${said}.${wait}`;
      case 503:
        return `A data source is unavailable (503)${said}. Nothing was charged.${wait}`;
      default:
        return `The service answered ${answer.status}${said}.`;
    }
  }

  // -- words --------------------------------------------------------------------------------

  function pollutantName(code) {
    return POLLUTANTS[code] || String(code).toUpperCase();
  }

  // WCAG relative luminance of #RRGGBB, to pick the text colour a swatch stays readable in.
  function luminance(hex) {
    const match = /^#?([0-9a-f]{6})$/i.exec(hex || "");
    if (!match) return null;
    const channel = (offset) => {
      const value = Number.parseInt(match[1].slice(offset, offset + 2), 16) / 255;
      return value <= 0.04045 ? value / 12.92 : ((value + 0.055) / 1.055) ** 2.4;
    };
    return 0.2126 * channel(0) + 0.7152 * channel(2) + 0.0722 * channel(4);
  }

  function readableOn(hex) {
    const lum = luminance(hex);
    if (lum === null) return "#000000";
    // Contrast with black is (L + 0.05) / 0.05, with white 1.05 / (L + 0.05): the larger wins.
    return (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05) ? "#000000" : "#ffffff";
  }

  function formatDistance(metres) {
    return metres >= 1000 ? `${(metres / 1000).toFixed(1)} km` : `${Math.round(metres)} m`;
  }

  function formatAge(seconds) {
    const minutes = Math.max(0, Math.round(seconds / 60));
    if (minutes < 1) return "just now";
    if (minutes < 90) return `${minutes} min ago`;
    const hours = Math.floor(minutes / 60);
    const rest = minutes % 60;
    return rest ? `${hours} h ${rest} min ago` : `${hours} h ago`;
  }

  function sourceWords(provenance) {
    const [base, ...extras] = String(provenance.source || "").split("+");
    let words = SOURCES[base] || base || "an unnamed source";
    if (extras.includes("stations")) {
      const stations = provenance.stations || [];
      if (!stations.length) return `${words}, corrected by station observations`;
      // The answer lists them heaviest first, each weighing at least 1 % at the point.
      const named = stations
        .slice(0, STATIONS_NAMED)
        .map(
          (station) =>
            `${station.name} (${formatDistance(station.distance_m)}, ` +
            `weight ${Math.round(Math.abs(Number(station.weight)) * 100)} %)`,
        );
      const more = stations.length - named.length;
      const count = `${stations.length} station${stations.length === 1 ? "" : "s"}`;
      words += `, corrected by ${count}: ${named.join(", ")}`;
      if (more > 0) words += ` and ${more} more`;
    }
    return words;
  }

  // Each concentration with its 90 % interval: how wrong it may be (docs/science.md).
  function concentrationWords(pollutants) {
    const parts = Object.entries(pollutants || {}).map(([code, value]) => {
      const [low, high] = value.interval90 || [];
      const interval =
        low === undefined ? "" : ` (90 %: ${Number(low).toFixed(1)} to ${Number(high).toFixed(1)})`;
      return `${pollutantName(code)} ${Number(value.concentration).toFixed(1)}${interval}`;
    });
    return parts.length ? `Concentrations, µg/m³: ${parts.join("; ")}.` : "";
  }

  function ageWords(provenance) {
    const at = new Date(provenance.data_time);
    const clock = Number.isNaN(at.getTime()) ? "an unknown hour" : `${at.toISOString().slice(11, 16)} UTC`;
    return `Values for ${clock}, ${formatAge(provenance.age_seconds)}.`;
  }

  // -- the panel ----------------------------------------------------------------------------

  const panel = {};

  function build(container) {
    const heading = html("h3", "Conditions at the point ");
    heading.append(html("span", "1 credit", "note cost"));
    panel.status = html("p", "", "conditions-status");
    panel.status.setAttribute("role", "status");
    panel.status.setAttribute("aria-live", "polite");
    panel.error = html("p", "", "conditions-error");
    panel.error.setAttribute("role", "alert");
    panel.error.hidden = true;
    panel.result = html("div", undefined, "conditions-result");
    panel.result.hidden = true;
    container.append(heading, panel.status, panel.error, panel.result);
    panel.status.textContent = "Click a forecast point on the map for its conditions now.";
  }

  function showError(message) {
    panel.error.textContent = message || "";
    panel.error.hidden = !message;
  }

  function indexCard(index) {
    const card = html("li", undefined, "conditions-index");
    card.dataset.code = index.code;
    const swatch = html("span", `${index.value} · ${index.category}`, "swatch");
    swatch.style.backgroundColor = index.colour;
    swatch.style.color = readableOn(index.colour);
    const name = html("span", index.name, "index-name");
    const top = html("div", undefined, "index-head");
    top.append(swatch, name);
    card.append(top);
    const dominant = index.dominant_pollutant;
    if (dominant) {
      const used = (index.concentrations || {})[dominant];
      let words = `Dominant pollutant: ${pollutantName(dominant)}`;
      if (used) {
        const averaging = AVERAGING[used.averaging] || used.averaging;
        words += `, ${Number(used.concentration).toFixed(1)} µg/m³ as a ${averaging}`;
      }
      card.append(html("p", `${words}.`, "dominant"));
    }
    const health = index.health || {};
    const advice = html("dl", undefined, "advice");
    advice.append(html("dt", "Everyone"), html("dd", health.general || "", "general"));
    advice.append(html("dt", "Sensitive groups"), html("dd", health.sensitive || "", "sensitive"));
    card.append(advice);
    return card;
  }

  function showConditions(body, point) {
    const result = panel.result;
    result.replaceChildren();
    const cards = html("ul", undefined, "conditions-indexes");
    for (const index of body.indexes || []) cards.append(indexCard(index));
    const [worst, best] = body.clean_air_score_interval90 || [];
    const band =
      worst === undefined || worst === best ? "" : ` (90 %: ${worst} to ${best})`;
    result.append(
      html(
        "p",
        `At ${point}: Clean Air Score ${body.clean_air_score} of 100${band}.`,
        "conditions-score",
      ),
      cards,
    );
    const provenance = body.provenance || {};
    result.append(
      html("p", concentrationWords(body.pollutants), "conditions-pollutants"),
      html("p", `Source: ${sourceWords(provenance)}.`, "conditions-source"),
      html("p", ageWords(provenance), "conditions-age"),
    );
    result.hidden = false;
  }

  // The credits left, in the words of the line explore.js keeps (read from /v1/quota, free).
  async function showCredits() {
    const line = $("credits");
    if (!line || !token()) return;
    const answer = await call("GET", "/v1/quota");
    if (!answer.ok || !answer.body) return;
    const { remaining, daily_remaining: today } = answer.body;
    line.textContent = `Credits left: ${remaining} this month, ${today} today.`;
  }

  async function ask(text) {
    const match = /^(-?\d+(?:\.\d+)?), (-?\d+(?:\.\d+)?)$/.exec(text.trim());
    if (!match) return;
    const request = ++asked;
    showError("");
    if (!token()) {
      panel.result.hidden = true;
      panel.status.textContent = "Paste a token to see the conditions at the point.";
      return;
    }
    panel.status.textContent = `Asking for the conditions at ${text}…`;
    const answer = await call("POST", PATH, {
      lat: Number.parseFloat(match[1]),
      lon: Number.parseFloat(match[2]),
    });
    if (request !== asked) return;
    panel.status.textContent = "";
    showCredits();
    if (!answer.ok || !answer.body) {
      panel.result.hidden = true;
      return showError(explain(answer));
    }
    showConditions(answer.body, text);
  }

  function init() {
    const container = $("conditions");
    const point = $("forecast-point");
    if (!container || !point) return;
    build(container);
    // explore.js rewrites the point's text on every forecast-point click, the same point
    // again included, so each click asks anew.
    new MutationObserver(() => ask(point.textContent || "")).observe(point, {
      childList: true,
      characterData: true,
      subtree: true,
    });
  }

  init();
})();
