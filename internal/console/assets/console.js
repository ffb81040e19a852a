// The console's only script, served from the binary (no inline script):
// buttons and forms POST to the console's own API with the page's CSRF
// token, and /events (server-sent events) updates the page live.
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
  function log(cls, text) {
    const li = document.createElement("li");
    li.className = cls;
    li.textContent = new Date().toLocaleTimeString() + " " + text;
    events.prepend(li);
  }
  const live = document.getElementById("live");
  const es = new EventSource("/events");
  es.onopen = function () { live.textContent = "live"; };
  es.onerror = function () { live.textContent = "live: reconnecting…"; };
  es.addEventListener("violation", function (m) {
    const v = JSON.parse(m.data);
    if (v.action.endsWith("-by-owner")) {
      log("state", v.detail);
    } else {
      log("violation", v.group + ": " + v.kind + " " + v.tool + " " + v.target + " (" + v.action + ")");
    }
    document.querySelectorAll("[data-live-violations]").forEach(function (tb) {
      const tr = document.createElement("tr");
      [new Date(v.time).toLocaleString(), v.group, v.kind, v.tool, v.target, v.action, v.detail].forEach(function (s) {
        const td = document.createElement("td"); td.textContent = s; tr.appendChild(td);
      });
      tb.prepend(tr);
    });
  });
  es.addEventListener("state", function (m) {
    const s = JSON.parse(m.data);
    log("state", s.group + " is " + s.state);
    document.querySelectorAll('[data-state-of="' + CSS.escape(s.group) + '"]').forEach(function (el) {
      el.textContent = s.state;
      el.className = "state state-" + s.state;
    });
  });
  es.addEventListener("channel", function (m) {
    const c = JSON.parse(m.data);
    log("channel", c.name + (c.connected ? " connected" : " disconnected") + ": " + c.state);
  });
  es.addEventListener("alert", function (m) {
    const a = JSON.parse(m.data);
    log("violation", "model API " + a.kind + ": " + a.detail);
  });
})();
