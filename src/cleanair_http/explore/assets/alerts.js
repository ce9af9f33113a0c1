// The explorer's "Alert me" panel and alert feed (issue 32): subscribe to alerts on the place
// or the trip set on the map (POST /ext/v1/alerts/subscriptions, free), list the user's
// subscriptions with their status and delete them, and poll the user's feed
// (GET /ext/v1/alerts/events) every 30 s while the page is visible. Kept apart from
// explore.js, whose API call, words, token, place and trip it uses through
// window.cleanairExplore (docs/explore.md). Everything the service sends is written with
// textContent: a message, a reason or a URL is never parsed as HTML.
"use strict";

(() => {
  const SUBSCRIPTIONS = "/ext/v1/alerts/subscriptions";
  const EVENTS = "/ext/v1/alerts/events";
  // The feed shares the connection's 60 polls a minute with plan polls: one every 30 s
  // leaves nearly all of them to plans.
  const FEED_EVERY_MS = 30_000;
  // A backlog (`more`) is read on a page at a time, as fast as plan polls go, for at most
  // this many pages in a row before the usual wait.
  const CATCH_UP_MS = 1100;
  const CATCH_UP_PAGES = 4;
  const FEED_PAGE = 100;
  // The newest events kept on the page.
  const FEED_KEEP = 200;
  // The categories of each official index, 0 the best, as the service names them
  // (cleanair_core/air/indexes; tests/cleanair_http/test_explore_alerts_panel.py holds this
  // table to them).
  // index-categories:begin
  const INDEXES = {
    "eu_eaqi_2024": {"short": "EAQI", "categories": ["Good", "Fair", "Moderate", "Poor", "Very poor", "Extremely poor"]},
    "us_epa_2024": {"short": "US AQI", "categories": ["Good", "Moderate", "Unhealthy for Sensitive Groups", "Unhealthy", "Very Unhealthy", "Hazardous"]},
    "uk_daqi": {"short": "DAQI", "categories": ["Low", "Moderate", "High", "Very High"]}
  };
  // index-categories:end
  // Without a named index a threshold must fit every index: the fewest categories.
  const OWN_INDEX_CATEGORIES = Math.min(...Object.values(INDEXES).map((i) => i.categories.length));
  const WEEKDAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
  const TYPES = {
    "air.alert": "Alert",
    "air.all_clear": "All clear",
    "air.forecast": "Forecast",
    "alerts.pool_exhausted": "Credits used up",
  };
  // Where a 422's `errors` entry is shown: the first key its `field` is or starts with.
  const FIELDS = [
    ["target.days", "days", "Days"],
    ["target", "target", "The place or trip"],
    ["kind.send_at", "send_at", "The sending time"],
    ["kind.target_day", "target_day", "The forecast day"],
    ["kind", "kind", "The kind"],
    ["quiet_hours", "quiet_hours", "Quiet hours"],
    ["index", "index", "The index"],
    ["threshold", "threshold", "The category"],
    ["direction", "direction", "The direction"],
    ["audience", "audience", "The audience"],
    ["timezone", "timezone", "The time zone"],
    ["webhook_url", "webhook_url", "The webhook URL"],
  ];

  const $ = (id) => document.getElementById(id);
  const shared = window.cleanairExplore;
  const { api, dayClock, token } = shared;

  function html(tag, text, className) {
    const element = document.createElement(tag);
    if (text !== undefined && text !== null) element.textContent = String(text);
    if (className) element.className = className;
    return element;
  }

  function showError(id, message) {
    const element = $(id);
    element.textContent = message || "";
    element.hidden = !message;
  }

  const formatPoint = (lat, lon) => `${Number(lat).toFixed(5)}, ${Number(lon).toFixed(5)}`;

  // What went wrong with an alerts call, in words a person can act on.
  function explain(answer) {
    const detail = answer.body && answer.body.detail ? `: ${answer.body.detail}` : "";
    switch (answer.status) {
      case 401:
        return `The token was not accepted (401)${detail}. Pair again or paste a valid token.`;
      case 403:
        return `This token may not manage alerts (403)${detail}. Alerts need a connection of ` +
          "the user's own (not a partner's) with scope aq:read; creating one needs a premium " +
          "user, and a trip alert scope routes:plan.";
      case 429: {
        const wait = answer.retryAfter === null ? "" : ` Try again ${shared.retryWords(answer.retryAfter)}.`;
        return `Too many requests (429)${detail}.${wait}`;
      }
      default:
        return shared.explain(answer);
    }
  }

  // -- the categories -------------------------------------------------------------------------

  // A threshold in words: the named index's category, or for the place's own index what it
  // is on each ("Poor (EAQI), Unhealthy (US AQI), Very High (DAQI)").
  function categoryWords(index, threshold) {
    if (index && INDEXES[index]) {
      return INDEXES[index].categories[threshold] ?? `category ${threshold}`;
    }
    return Object.values(INDEXES)
      .map((i) => `${i.categories[threshold]} (${i.short})`)
      .join(", ");
  }

  function offerThresholds() {
    const select = $("alert-threshold");
    const index = $("alert-index").value;
    const count = index ? INDEXES[index].categories.length : OWN_INDEX_CATEGORIES;
    const chosen = select.value === "" ? 3 : Number(select.value);
    select.replaceChildren();
    for (let n = 0; n < count; n += 1) {
      const option = html("option", categoryWords(index, n));
      option.value = String(n);
      select.appendChild(option);
    }
    select.value = String(Math.min(chosen, count - 1));
  }

  // -- what the alert is on -------------------------------------------------------------------

  const onTrip = () => document.querySelector('input[name="alert-target"]:checked').value === "trip";

  // The Leaving field's time of day (HH:MM), or "" when it is empty (leaving now).
  const departure = () => shared.leaving().slice(11, 16);

  function showAbout() {
    const trip = onTrip();
    $("alert-days").hidden = !trip;
    if (!trip) {
      const place = shared.place();
      $("alert-about").textContent = place
        ? `At ${formatPoint(place.lat, place.lon)}.`
        : "Pick a forecast point (or a start) on the map.";
      return;
    }
    const { start, end, activity } = shared.trip();
    if (!start || !end) {
      $("alert-about").textContent = "Pick a start and an end on the map.";
      return;
    }
    const at = departure();
    $("alert-about").textContent = at
      ? `The ${activity} trip from A to B, leaving at ${at} (Leaving, above).`
      : `The ${activity} trip from A to B: set its usual time in Leaving, above.`;
  }

  function showKind() {
    const forecast = $("alert-kind").value === "forecast";
    for (const element of document.querySelectorAll("#alerts .forecast-only")) {
      element.hidden = !forecast;
    }
  }

  // -- creating -------------------------------------------------------------------------------

  function clearFieldErrors() {
    for (const [, key] of FIELDS) showError(`alert-error-${key}`, "");
  }

  // Each entry of a 422's `errors` next to the field it names; those naming no field here
  // (the per-user limit's "") in the panel's error, with their field.
  function showFieldErrors(errors) {
    const shown = new Map();
    const unplaced = [];
    for (const entry of errors) {
      const field = String(entry.field ?? "");
      const message = String(entry.message ?? entry.rule ?? "is invalid");
      const found = FIELDS.find(([prefix]) => field === prefix || field.startsWith(`${prefix}.`));
      if (!found) {
        unplaced.push(field ? `${field} ${message}` : message);
        continue;
      }
      const [, key, label] = found;
      const words = shown.get(key) || [];
      words.push(`${label} ${message}.`);
      shown.set(key, words);
    }
    for (const [key, words] of shown) showError(`alert-error-${key}`, words.join(" "));
    return unplaced;
  }

  function target() {
    if (!onTrip()) {
      const place = shared.place();
      if (!place) return { error: "Pick a forecast point (or a start) on the map first." };
      return { value: { type: "place", lat: place.lat, lon: place.lon } };
    }
    const { start, end, activity } = shared.trip();
    if (!start || !end) return { error: "Pick a start and an end on the map first." };
    const at = departure();
    if (!at) return { error: "Set the trip's usual time in Leaving, above: a trip alert is about it." };
    const days = [...document.querySelectorAll("#alert-days input:checked")].map((box) => Number(box.value));
    if (!days.length) return { error: "Tick at least one day.", key: "days" };
    return {
      value: {
        type: "trip",
        start: { latitude: start.lat, longitude: start.lon },
        end: { latitude: end.lat, longitude: end.lon },
        activity_type: activity,
        departure: at,
        days,
      },
    };
  }

  function request(chosen) {
    const kind = $("alert-kind").value === "forecast"
      ? { type: "forecast", target_day: $("alert-target-day").value, send_at: $("alert-send-at").value }
      : { type: "observed" };
    const webhook = $("alert-webhook").value.trim();
    return {
      target: chosen,
      index: $("alert-index").value || null,
      threshold: Number($("alert-threshold").value),
      direction: $("alert-direction").value,
      audience: $("alert-audience").value,
      kind,
      timezone: $("alert-timezone").value.trim(),
      quiet_hours: $("alert-quiet").checked
        ? { start: $("alert-quiet-start").value, end: $("alert-quiet-end").value }
        : null,
      webhook_url: webhook || null,
    };
  }

  async function create() {
    settleToken();
    clearFieldErrors();
    showError("alert-error", "");
    $("alert-status").textContent = "";
    hideSecret();
    if (!token()) return showError("alert-error", "Pair or paste a token first.");
    const chosen = target();
    if (chosen.error) return showError(`alert-error-${chosen.key || "target"}`, chosen.error);
    $("alert-create").disabled = true;
    const madeWith = token();
    try {
      const answer = await api("POST", SUBSCRIPTIONS, request(chosen.value));
      if (answer.status === 201 && answer.body && answer.body.subscription) {
        $("alert-status").textContent = "Alert created: it is listed below.";
        if (answer.body.webhook_secret) showSecret(answer.body.webhook_secret, madeWith);
        loadList();
        return;
      }
      if (answer.status === 422 && answer.body && Array.isArray(answer.body.errors)) {
        const unplaced = showFieldErrors(answer.body.errors);
        const more = unplaced.length ? ` ${unplaced.join("; ")}.` : "";
        const fields = unplaced.length < answer.body.errors.length ? " Fix the fields marked." : "";
        return showError("alert-error", `The alert was not created (422).${fields}${more}`);
      }
      showError("alert-error", explain(answer));
    } finally {
      $("alert-create").disabled = false;
    }
  }

  // -- the secret, shown once -----------------------------------------------------------------

  // Only in this element, until the next creation or a token change: never stored.
  // The token the shown secret was made with: a token change settling after the creation
  // (its handler waits for typing to rest) must not hide the secret of the same token.
  let secretFor = null;
  function showSecret(secret, madeWith) {
    $("alert-secret").textContent = secret;
    $("alert-copy-status").textContent = "";
    $("alert-secret-box").hidden = false;
    secretFor = madeWith;
  }

  function hideSecret() {
    $("alert-secret").textContent = "";
    $("alert-secret-box").hidden = true;
    secretFor = null;
  }

  async function copySecret() {
    const secret = $("alert-secret").textContent;
    try {
      await navigator.clipboard.writeText(secret);
      $("alert-copy-status").textContent = "Copied.";
    } catch (error) {
      // No clipboard permission: select it for a Ctrl+C.
      const range = document.createRange();
      range.selectNodeContents($("alert-secret"));
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      $("alert-copy-status").textContent = "Selected: press Ctrl+C (or ⌘C) to copy it.";
    }
  }

  // -- the list -------------------------------------------------------------------------------

  function dayWords(days) {
    const sorted = [...days].sort((a, b) => a - b);
    if (sorted.length === 7) return "every day";
    if (sorted.join() === "1,2,3,4,5") return "Mon–Fri";
    if (sorted.join() === "6,7") return "weekends";
    return sorted.map((d) => WEEKDAYS[d - 1] || String(d)).join(", ");
  }

  function describeTarget(found) {
    const t = found.target;
    if (t.type === "place") return `Place ${formatPoint(t.lat, t.lon)}`;
    return `Trip ${formatPoint(t.start.latitude, t.start.longitude)} → ` +
      `${formatPoint(t.end.latitude, t.end.longitude)}, ${t.activity_type} at ${t.departure}, ` +
      `${dayWords(t.days)}`;
  }

  function describeRule(found) {
    const index = found.index && INDEXES[found.index] ? INDEXES[found.index].short : "the place's own index";
    const side = found.direction === "better" ? "at or better than" : "at or worse than";
    const when = found.kind.type === "forecast"
      ? `the forecast for ${found.kind.target_day}, sent at ${found.kind.send_at}`
      : "as it happens, then an all-clear";
    const audience = found.audience === "sensitive" ? "advice for sensitive groups" : "advice for everyone";
    const parts = [
      `${index} ${side} ${categoryWords(found.index, found.threshold)}`,
      when,
      audience,
      `times in ${found.timezone}`,
    ];
    if (found.quiet_hours) parts.push(`quiet ${found.quiet_hours.start}–${found.quiet_hours.end}`);
    parts.push(found.webhook_url ? `webhook to ${hostOf(found.webhook_url)}` : "feed only");
    return `${parts.join("; ")}.`;
  }

  // A webhook's host only: its path or query may hold the receiver's token.
  function hostOf(url) {
    try {
      return new URL(url).host;
    } catch (error) {
      return "its URL";
    }
  }

  function showList(subscriptions, limit) {
    const list = $("alert-list");
    list.replaceChildren();
    $("alert-list-status").textContent = subscriptions.length
      ? `${subscriptions.length} of at most ${limit}.`
      : "None yet.";
    for (const found of subscriptions) {
      const item = html("li");
      item.dataset.id = found.id;
      item.classList.add(found.status === "active" ? "active" : "disabled");
      const head = html("div", undefined, "alert-head");
      head.append(html("span", describeTarget(found), "alert-what"));
      const remove = html("button", "Delete", "alert-delete");
      remove.type = "button";
      remove.setAttribute("aria-label", `Delete the alert: ${describeTarget(found)}`);
      remove.addEventListener("click", () => removeSubscription(found.id, remove));
      head.append(remove);
      item.append(head, html("div", describeRule(found), "alert-rule"));
      if (found.status === "active") {
        item.append(html("div", "Active.", "alert-state"));
      } else {
        const since = found.disabled_at ? ` (since ${dayClock(new Date(found.disabled_at))})` : "";
        const why = found.disabled_reason ? `: ${found.disabled_reason}` : "";
        item.append(html("div", `Disabled${since}${why}. Delete it and create another.`, "alert-state"));
      }
      list.appendChild(item);
    }
  }

  let listed = 0; // bumps on every list request: an older answer is dropped

  async function loadList() {
    const mine = ++listed;
    if (!token()) {
      $("alert-list").replaceChildren();
      $("alert-list-status").textContent = "Pair or paste a token to see your alerts.";
      return;
    }
    const answer = await api("GET", SUBSCRIPTIONS);
    if (mine !== listed) return;
    if (!answer.ok || !answer.body) {
      $("alert-list").replaceChildren();
      $("alert-list-status").textContent = "";
      return showError("alert-error", explain(answer));
    }
    showList(answer.body.subscriptions || [], answer.body.limit);
  }

  async function removeSubscription(id, button) {
    showError("alert-error", "");
    button.disabled = true;
    const answer = await api("DELETE", `${SUBSCRIPTIONS}/${encodeURIComponent(id)}`);
    if (answer.status === 204 || answer.status === 404) {
      $("alert-status").textContent = answer.status === 204 ? "Alert deleted." : "That alert was gone already.";
    } else {
      button.disabled = false;
      showError("alert-error", explain(answer));
    }
    loadList();
  }

  // -- the feed -------------------------------------------------------------------------------

  const feed = {
    run: 0, // bumps on a token change: an answer for the old token is dropped
    after: 0, // the cursor of the last event read (`next_after`)
    events: [], // oldest first, at most FEED_KEEP
    lastPoll: 0, // Date.now() of the last request
    wait: FEED_EVERY_MS, // from the last request to the next
    timer: null,
    stopped: false, // after a 401 or 403: until the token changes
    busy: false,
    catchUp: 0, // pages read in a row without the usual wait
  };

  function scheduleFeed() {
    clearTimeout(feed.timer);
    feed.timer = null;
    if (!token() || document.hidden || feed.stopped || feed.busy) return;
    const due = Math.max(0, feed.lastPoll + feed.wait - Date.now());
    feed.timer = setTimeout(pollFeed, due);
  }

  async function pollFeed() {
    const run = feed.run;
    feed.busy = true;
    feed.lastPoll = Date.now();
    let answer;
    try {
      answer = await api("GET", `${EVENTS}?after=${feed.after}&limit=${FEED_PAGE}`);
    } finally {
      if (run === feed.run) feed.busy = false;
    }
    if (run !== feed.run) return;
    feed.wait = FEED_EVERY_MS;
    if (answer.status === 429) {
      feed.wait = Math.max(FEED_EVERY_MS, (answer.retryAfter ?? 60) * 1000);
      $("feed-status").textContent =
        `Polling too fast: the next check ${shared.retryWords(Math.round(feed.wait / 1000))}.`;
    } else if (answer.status === 401 || answer.status === 403) {
      feed.stopped = true;
      $("feed-status").textContent = "";
      showError("feed-error", explain(answer));
    } else if (!answer.ok || !answer.body) {
      showError("feed-error", explain(answer));
    } else {
      showError("feed-error", "");
      const page = answer.body;
      feed.events = feed.events.concat(page.events || []).slice(-FEED_KEEP);
      feed.after = page.next_after;
      // After a few pages in a row, the usual wait, then on again.
      if (page.more && feed.catchUp < CATCH_UP_PAGES) {
        feed.catchUp += 1;
        feed.wait = CATCH_UP_MS;
      } else {
        feed.catchUp = 0;
      }
      showFeed();
    }
    scheduleFeed();
  }

  function showFeed() {
    const list = $("feed");
    list.replaceChildren();
    const checked = `checked at ${dayClock(new Date(feed.lastPoll))}`;
    $("feed-status").textContent = feed.events.length
      ? `${feed.events.length} event${feed.events.length === 1 ? "" : "s"}, newest first; ${checked}.`
      : `No alerts yet: events appear here as they are decided (${checked}).`;
    for (const event of [...feed.events].reverse()) {
      const payload = event.payload || {};
      const data = payload.data || {};
      const item = html("li", undefined, String(payload.type || "").replaceAll(".", "-"));
      item.dataset.cursor = String(event.cursor);
      const head = html("div", undefined, "feed-head");
      head.append(html("span", TYPES[payload.type] || String(payload.type || "Event"), "feed-type"));
      if (data.category_name) head.append(html("span", String(data.category_name), "feed-category"));
      head.append(html("span", dayClock(new Date(event.recorded_at)), "feed-time"));
      item.append(head, html("p", data.message || "", "feed-message"));
      if (data.advice) item.append(html("p", `Advice: ${data.advice}`, "feed-advice"));
      list.appendChild(item);
    }
  }

  // A new token (paired, pasted, forgotten) is another connection, perhaps another user: its
  // own list and feed, from the start.
  let tokenTimer = null;
  function tokenChanged() {
    clearTimeout(tokenTimer);
    // Typing a token fires on every key: act once it rests.
    tokenTimer = setTimeout(tokenSettled, 300);
  }

  // An action taken before the token rests is the new token's: settle it first, so that the
  // rest's end (late on a busy machine) cannot wipe the action's answer.
  function settleToken() {
    if (tokenTimer === null) return;
    clearTimeout(tokenTimer);
    tokenSettled();
  }

  function tokenSettled() {
    tokenTimer = null;
    feed.run += 1;
    Object.assign(feed, {
      after: 0, events: [], lastPoll: 0, wait: FEED_EVERY_MS, stopped: false, busy: false,
      catchUp: 0,
    });
    $("feed").replaceChildren();
    showError("feed-error", "");
    showError("alert-error", "");
    $("feed-status").textContent = token() ? "" : "Pair or paste a token to see your alerts' events.";
    if (token() !== secretFor) {
      $("alert-status").textContent = "";
      hideSecret();
    }
    loadList();
    scheduleFeed();
  }

  // -- start ----------------------------------------------------------------------------------

  $("alert-timezone").value = shared.timeZone();
  offerThresholds();
  showKind();
  showAbout();
  $("alert-index").addEventListener("change", offerThresholds);
  $("alert-kind").addEventListener("change", showKind);
  $("alert-quiet").addEventListener("change", () => {
    $("alert-quiet-start").disabled = !$("alert-quiet").checked;
    $("alert-quiet-end").disabled = !$("alert-quiet").checked;
  });
  for (const radio of document.querySelectorAll('input[name="alert-target"]')) {
    radio.addEventListener("change", showAbout);
  }
  // The place and trip are explore.js's: shown again whenever it writes them.
  const watcher = new MutationObserver(showAbout);
  for (const id of ["forecast-point", "start-point", "end-point"]) {
    watcher.observe($(id), { childList: true, characterData: true, subtree: true });
  }
  for (const id of ["start-time", "activity"]) {
    $(id).addEventListener("input", showAbout);
    $(id).addEventListener("change", showAbout);
  }
  $("start-now").addEventListener("click", () => setTimeout(showAbout));
  $("alert-create").addEventListener("click", create);
  $("alert-copy").addEventListener("click", copySecret);
  document.addEventListener("cleanair:token", tokenChanged);
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) clearTimeout(feed.timer);
    else scheduleFeed();
  });
  $("feed-status").textContent = token() ? "" : "Pair or paste a token to see your alerts' events.";
  loadList();
  scheduleFeed();
})();
