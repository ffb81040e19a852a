// The console's only script, served from the binary (no inline script):
// buttons and forms POST to the console's own API with the page's CSRF
// token, and /events (server-sent events) updates the page live. Times
// and sentences come written from the daemon, so every page reads alike.
"use strict";
(function () {
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const notice = document.getElementById("notice");
  function say(text) { notice.textContent = text; notice.hidden = false; }

  async function post(url, body) {
    const res = await fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: { "X-CSRF-Token": csrf, "Content-Type": "application/json" },
      body: JSON.stringify(body || {}),
    });
    let text = await res.text();
    try { text = JSON.parse(text).message; } catch (e) { /* a plain-text refusal */ }
    say(text);
  }

  document.addEventListener("click", function (ev) {
    const b = ev.target.closest("button[data-post]");
    if (b) { ev.preventDefault(); post(b.dataset.post); }
  });
  document.addEventListener("submit", function (ev) {
    const f = ev.target.closest("form[data-post-form]");
    if (!f) return;
    ev.preventDefault();
    post(f.dataset.postForm, Object.fromEntries(new FormData(f)));
  });

  const events = document.getElementById("events");
  function log(e) {
    const none = document.getElementById("events-none");
    if (none) none.remove();
    const li = document.createElement("li");
    li.className = e.class;
    const when = document.createElement("span");
    when.className = "when";
    when.textContent = e.time;
    li.append(when, " " + e.text);
    events.prepend(li);
    while (events.children.length > 20) events.lastElementChild.remove();
  }
  const live = document.getElementById("live");
  const es = new EventSource("/events?after=" + encodeURIComponent(events.dataset.after));
  es.onopen = function () { live.textContent = "live"; };
  es.onerror = function () {
    live.textContent = es.readyState === EventSource.CLOSED ? "not live: reload the page" : "live: reconnecting…";
  };
  es.addEventListener("ended", function () {
    es.close();
    live.textContent = "the session has ended: run 'nanoclawd console' for a new login URL";
  });
  es.addEventListener("violation", function (m) {
    const e = JSON.parse(m.data);
    log(e);
    document.querySelectorAll("[data-live-violations]").forEach(function (tb) {
      if (tb.dataset.liveViolations && tb.dataset.liveViolations !== e.row.group) return;
      const tr = document.createElement("tr");
      [e.row.time, e.row.group, e.row.what, e.row.action, e.row.detail || ""].forEach(function (s) {
        const td = document.createElement("td"); td.textContent = s; tr.appendChild(td);
      });
      tb.prepend(tr);
    });
  });
  // A group's state, and the one action that applies to it, change in place.
  es.addEventListener("state", function (m) {
    const e = JSON.parse(m.data);
    log(e);
    document.querySelectorAll('[data-state-of="' + CSS.escape(e.group) + '"]').forEach(function (el) {
      el.textContent = e.state;
      el.className = "state state-" + e.state;
    });
    const action = e.state === "paused" ? "resume" : "pause";
    document.querySelectorAll('button[data-toggle-of="' + CSS.escape(e.group) + '"]').forEach(function (b) {
      b.dataset.post = "/api/groups/" + encodeURIComponent(e.group) + "/" + action;
      b.textContent = action === "resume" ? "Resume" : "Pause";
    });
  });
  es.addEventListener("channel", function (m) { log(JSON.parse(m.data)); });
  es.addEventListener("alert", function (m) { log(JSON.parse(m.data)); });
})();
