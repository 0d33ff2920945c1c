// a2a-tape ui: what htmx's attributes do not say. The scrubber's play (1x, 10x at the recorded
// pace), following the newest position while a task is recorded, the live timeline rows (kept
// in order with the paged rows), and the doctor's links to positions. No eval, no inline script.
(function () {
  "use strict";

  var play = { speed: 0, timer: null };

  function $(selector, root) { return (root || document).querySelector(selector); }

  // the run's path prefix (the UI lives under it: access.py), which every address we make starts with
  function under(path) { return (document.body.dataset.root || "") + path; }

  function scrub() { return $("#scrub"); }

  function following() {
    var s = scrub();
    return !s || (Number(s.value) >= Number(s.max) && !play.speed);
  }

  function load(n) {
    var s = scrub();
    if (!s) return;
    s.value = String(n);
    htmx.trigger("#scrubber", "scrub");
  }

  function stop() {
    play.speed = 0;
    if (play.timer) clearTimeout(play.timer);
    play.timer = null;
    document.querySelectorAll("button.play").forEach(function (b) { b.classList.remove("playing"); });
  }

  function start(speed, button) {
    var s = scrub();
    stop();
    play.speed = speed;
    button.classList.add("playing");
    load(Number(s.value) >= Number(s.max) ? 0 : Number(s.value) + 1);
  }

  // after the channels panel changed: the scrubber shows where it stands, and play goes on
  function settled() {
    var at = $("#channels .at");
    var s = scrub();
    if (!at || !s) return;
    var n = Number(at.dataset.n);
    if (document.activeElement !== s || play.speed) s.value = String(n);
    var label = $("#scrub-label");
    if (label) label.textContent = at.dataset.label;
    document.querySelectorAll("#events tr.current").forEach(function (tr) { tr.classList.remove("current"); });
    var row = at.dataset.position && document.getElementById("ev-" + at.dataset.position);
    if (row) row.classList.add("current");
    if (!play.speed) return;
    if (n >= Number(s.max) || at.dataset.next === "") { stop(); return; }
    var wait = Math.min(Number(at.dataset.next) / play.speed, 3.0) * 1000;  // a long silence is cut to 3 s
    play.timer = setTimeout(function () { if (play.speed) load(n + 1); }, wait);
  }

  // the live timeline: rows arrive by SSE in log order; while older pages are still loading,
  // they are left to the pager, and fetched once it is done
  var stale = false;

  function lastRow() {
    var rows = document.querySelectorAll("#events > tr[data-position]");
    return rows.length ? rows[rows.length - 1] : null;
  }

  function catchUp() {
    var section = $("section.task[data-task]");
    var last = lastRow();
    if (!section || !last || $("#events > tr.more")) return;
    stale = false;
    var url = under("/task/rows?task=") + encodeURIComponent(section.dataset.task) + "&after=" + last.dataset.position;
    htmx.ajax("GET", url, { target: "#events", swap: "beforeend" });
  }

  document.addEventListener("htmx:sseBeforeMessage", function (e) {
    var type = e.detail && e.detail.type;
    if (type === "task") {  // a task's new row replaces its old one (it goes to the top)
      var id = /^\s*<tr id="(row-[0-9a-f]+)"/.exec(e.detail.data || "");
      var old = id && document.getElementById(id[1]);
      if (old) old.remove();
    }
    if (type === "rows" && $("#events > tr.more")) { stale = true; e.preventDefault(); }
    if (type === "channels" && !following()) e.preventDefault();
  });

  // the task's header was replaced (a live update): the scrubber's end moves with the task, and
  // the doctor looks again once the task has ended
  function headerChanged() {
    var counts = $("#task-header .counts");
    var s = scrub();
    if (!counts || !s) return;
    var follow = following();
    s.max = counts.dataset.events;
    if (follow) s.value = s.max;
    if (counts.dataset.terminal === "yes" || counts.dataset.recording === "no") {  // done, or its exchange closed
      var section = $("section.task.live");
      if (section) {
        section.classList.remove("live");
        htmx.trigger("#findings", "refresh");
      }
    }
  }

  function changed(target) {
    if (!target) return;
    if (target.id === "channels") settled();
    if (target.id === "task-header") headerChanged();
    if (stale && !$("#events > tr.more")) catchUp();
    if (target.id === "task-rows") document.querySelectorAll("#task-rows > tr.end.empty").forEach(function (tr) {
      if (document.querySelector("#task-rows > tr.task-row")) tr.remove();
    });
  }

  // htmx's own requests (paging, the scrubber) and the SSE extension's swaps (live updates)
  document.addEventListener("htmx:afterSwap", function (e) { changed(e.detail.target); });
  document.addEventListener("htmx:sseMessage", function (e) { changed(e.target); });

  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest("button.play");
    if (button) {
      if (play.speed === Number(button.dataset.speed)) stop(); else start(Number(button.dataset.speed), button);
      return;
    }
    var link = e.target.closest && e.target.closest("a.to-position");
    if (link) {
      var row = document.getElementById("ev-" + link.dataset.position);
      var section = $("section.task[data-task]");
      if (!row || !section) return;  // not on this page yet: the link opens the task there
      e.preventDefault();
      stop();
      row.scrollIntoView({ block: "center" });
      var url = under("/task/at?task=") + encodeURIComponent(section.dataset.task) + "&position=" + link.dataset.position;
      htmx.ajax("GET", url, { target: "#channels", swap: "innerHTML" });
    }
  });

  document.addEventListener("input", function (e) { if (e.target && e.target.id === "scrub") stop(); });

  // a timeline row's raw bytes and decoded JSON, fetched the first time its details open
  document.addEventListener("toggle", function (e) {
    var details = e.target;
    if (!details.matches || !details.matches("details.item") || !details.open || details.dataset.loaded) return;
    var row = details.closest("tr[data-position]");
    var section = $("section.task[data-task]");
    if (!row || !section) return;
    details.dataset.loaded = "yes";
    var url = under("/task/event?task=") + encodeURIComponent(section.dataset.task) + "&position=" + row.dataset.position;
    htmx.ajax("GET", url, { target: details.querySelector(".raw"), swap: "innerHTML" });
  }, true);
})();
