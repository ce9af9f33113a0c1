// The explorer's departure chart: for the trip picked on the map (start, end, activity), the
// inhaled dose of the cleanest route leaving at each start time of a window from now, the
// best departure and the window as good as it marked (POST /ext/v1/routes/departures, 25
// credits, polled like a plan). Kept apart from explore.js, whose API call, words and trip it
// uses through window.cleanairExplore (docs/explore.md).
"use strict";

(() => {
  const SUBMIT = "/ext/v1/routes/departures";
  const SVG_NS = "http://www.w3.org/2000/svg"; // a namespace name, never fetched
  // Polls share the plans' 60 a minute per connection: stay just under it, as explore.js.
  const POLL_EVERY_MS = 1100;
  // Departures whose dose is within this share of the least one are as good as the best: the
  // planner's materiality threshold (planner.MATERIAL_REDUCTION_PCT), under which a
  // difference lies within a modelled dose's own error.
  const AS_GOOD_PCT = 3;
  // The bottom margin holds two lines: the start times and, where it changes, their day.
  const [WIDTH, HEIGHT] = [420, 210];
  const [LEFT, RIGHT, TOP, BOTTOM] = [40, 10, 22, 38];

  const $ = (id) => document.getElementById(id);
  const { api, atWords, dayClock, dayWord, explain, retryWords, showCredits, timeZone, token, trip } =
    window.cleanairExplore;
  let run = 0; // bumps on every submission: a stale poll loop stops

  function svg(tag, attributes, parent) {
    const element = document.createElementNS(SVG_NS, tag);
    for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, value);
    parent.appendChild(element);
    return element;
  }

  function showStatus(text) {
    $("departures-status").textContent = text;
  }

  function showError(message) {
    const element = $("departures-error");
    element.textContent = message || "";
    element.hidden = !message;
  }

  const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  function clock(iso) {
    const format = new Intl.DateTimeFormat("en-GB", {
      hour: "2-digit",
      minute: "2-digit",
      timeZone: timeZone(),
    });
    return format.format(new Date(iso));
  }

  // A start time with its day when it is not today ("tomorrow 01:27").
  const when = (iso) => dayClock(new Date(iso));

  // -- asking -------------------------------------------------------------------------------

  async function submit() {
    showError("");
    if (!token()) return showError("Paste a token first.");
    const { start, end, activity } = trip();
    if (!start || !end) return showError("Pick a start and an end on the map.");
    const hours = Number($("departures-hours").value);
    const now = new Date();
    now.setUTCSeconds(0, 0);
    const latest = new Date(now.getTime() + hours * 3_600_000);
    const mine = ++run;
    $("departures").disabled = true;
    showStatus("Submitting…");
    try {
      const submitted = await api("POST", SUBMIT, {
        start: { latitude: start.lat, longitude: start.lon },
        end: { latitude: end.lat, longitude: end.lon },
        activity_type: activity,
        earliest: now.toISOString(),
        latest: latest.toISOString(),
        step_minutes: Number($("departures-step").value),
      });
      if (mine !== run) return;
      showCredits();
      if (submitted.status !== 202) {
        showStatus("");
        return showError(explain(submitted));
      }
      await poll(submitted.body.request_id, mine);
    } finally {
      if (mine === run) $("departures").disabled = false;
    }
  }

  async function poll(requestId, mine) {
    let wait = POLL_EVERY_MS;
    let polls = 0;
    let limited = "";
    for (;;) {
      showStatus(limited || `Planning every departure (request ${requestId}); polls so far: ${polls}.`);
      await delay(wait);
      if (mine !== run) return;
      const answer = await api("GET", `${SUBMIT}/${encodeURIComponent(requestId)}`);
      if (mine !== run) return;
      polls += 1;
      if (answer.status === 429) {
        wait = Math.max(POLL_EVERY_MS, (answer.retryAfter ?? 1) * 1000);
        limited = `Polling too fast: waiting ${retryWords(Math.round(wait / 1000))}.`;
        continue;
      }
      limited = "";
      if (!answer.ok) {
        showStatus("");
        return showError(explain(answer));
      }
      const { status, result, error } = answer.body;
      if (status === "pending") {
        wait = POLL_EVERY_MS;
        continue;
      }
      if (status === "failed") {
        showStatus("");
        return showError(`The departures could not be planned: ${error || "no reason given"}.`);
      }
      showStatus(`Planned ${result.departures.length} departures.`);
      show(result);
      return;
    }
  }

  // -- showing ------------------------------------------------------------------------------

  // The departures as good as the best (within AS_GOOD_PCT of its dose) that run on from it
  // without a worse one between: the window to leave in.
  function bestWindow(departures, best) {
    const index = departures.findIndex((d) => d.start_time === best.start_time);
    const good = (d) => d.dose !== null && d.dose <= best.dose * (1 + AS_GOOD_PCT / 100);
    let [first, last] = [index, index];
    while (first > 0 && good(departures[first - 1])) first -= 1;
    while (last < departures.length - 1 && good(departures[last + 1])) last += 1;
    return [first, last];
  }

  function describe(result, window) {
    const { best, departures } = result;
    if (best.dose === null) return "No dose data along the route: nothing to compare.";
    const [first, last] = window;
    const span = first === last
      ? atWords(new Date(departures[first].start_time))
      : `between ${when(departures[first].start_time)} and ${when(departures[last].start_time)}`;
    const saved = result.dose_saved_pct;
    const against = saved === null
      ? ""
      : saved > 0
        ? `: ${saved.toFixed(0)} % less inhaled than leaving now by the direct route`
        : ": no less than leaving now by the direct route";
    return `Best: leave ${atWords(new Date(best.start_time))}${against}. As good (within ` +
      `${AS_GOOD_PCT} %): leaving ${span}.`;
  }

  function show(result) {
    const { departures, best } = result;
    const window = best.dose === null ? [-1, -1] : bestWindow(departures, best);
    $("departures-best").textContent = describe(result, window);
    // The air layer's time slider marks the best departure's hour (air.js).
    document.dispatchEvent(new CustomEvent("cleanair:best-departure", {
      detail: best.dose === null ? null : best.start_time,
    }));
    const chart = $("departures-chart");
    chart.replaceChildren();
    // Shown once there is something to chart: an empty box before asking says nothing.
    chart.removeAttribute("hidden"); // an SVG element has no `hidden` property to set
    $("departures-legend").hidden = false;
    const doses = departures.map((d) => d.dose).filter((d) => d !== null);
    if (result.baseline_dose !== null) doses.push(result.baseline_dose);
    svg("text", { class: "title", x: LEFT, y: 14 }, chart).textContent =
      "Relative inhaled dose by start time";
    if (!doses.length) return;
    const high = Math.max(...doses) * 1.1 || 1;
    const slot = (WIDTH - LEFT - RIGHT) / departures.length;
    const x = (i) => LEFT + i * slot;
    const y = (v) => TOP + (1 - v / high) * (HEIGHT - TOP - BOTTOM);
    for (let k = 0; k <= 4; k += 1) {
      const value = (high * k) / 4;
      svg("line", { class: "grid", x1: LEFT, x2: WIDTH - RIGHT, y1: y(value), y2: y(value) }, chart);
      const label = svg("text", { x: LEFT - 4, y: y(value) + 3, "text-anchor": "end" }, chart);
      label.textContent = value >= 10 ? value.toFixed(0) : value.toFixed(2);
    }
    const [first, last] = window;
    if (first >= 0) {
      svg("rect", {
        class: "best-window",
        x: x(first),
        y: TOP,
        width: (last - first + 1) * slot,
        height: HEIGHT - TOP - BOTTOM,
      }, chart);
    }
    departures.forEach((departure, i) => {
      if (departure.dose === null) return;
      const isBest = departure.start_time === best.start_time;
      const bar = svg("rect", {
        class: isBest ? "departure best" : "departure",
        "data-start": departure.start_time,
        x: x(i) + slot * 0.15,
        y: y(departure.dose),
        width: slot * 0.7,
        height: y(0) - y(departure.dose),
      }, chart);
      const score = departure.clean_air_score === null ? "" : `, Clean Air Score ${departure.clean_air_score.toFixed(0)}`;
      svg("title", {}, bar).textContent =
        `${when(departure.start_time)}: dose ${departure.dose.toFixed(3)}${score}` +
        `, ${(departure.distance / 1000).toFixed(2)} km${isBest ? " (best)" : ""}`;
    });
    if (result.baseline_dose !== null) {
      const line = svg("line", {
        class: "baseline",
        x1: LEFT,
        x2: WIDTH - RIGHT,
        y1: y(result.baseline_dose),
        y2: y(result.baseline_dose),
      }, chart);
      svg("title", {}, line).textContent =
        `Leaving now by the direct route: dose ${result.baseline_dose.toFixed(3)}`;
    }
    svg("line", { class: "axis", x1: LEFT, x2: WIDTH - RIGHT, y1: y(0), y2: y(0) }, chart);
    const every = Math.max(1, Math.ceil(departures.length / 8));
    // The day under the first time when the chart is not all today, and under each time
    // whose day differs from the label before it: 02:27 … 02:27 says which is which.
    const days = departures.map((d) => dayWord(new Date(d.start_time)));
    const spansDays = days.some((day) => day !== "today");
    let shownDay = spansDays ? null : "today";
    for (let i = 0; i < departures.length; i += every) {
      const label = svg("text", { x: x(i) + slot / 2, y: HEIGHT - BOTTOM + 14, "text-anchor": "middle" }, chart);
      label.textContent = clock(departures[i].start_time);
      if (days[i] !== shownDay) {
        const day = svg("text", { class: "day", x: x(i) + slot / 2, y: HEIGHT - BOTTOM + 27, "text-anchor": "middle" }, chart);
        day.textContent = days[i];
        shownDay = days[i];
      }
    }
  }

  $("departures").addEventListener("click", submit);
})();
