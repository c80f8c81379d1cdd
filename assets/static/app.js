// Gantry's own small script: live log tail, live command output,
// confirmations, copy buttons.
// Everything works without it; it only makes pages livelier.
(function () {
  "use strict";

  // Forms and buttons with data-confirm ask first.
  document.addEventListener("submit", function (ev) {
    var msg = ev.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) ev.preventDefault();
  });

  // Buttons with data-copy copy the text of the element they name.
  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest("[data-copy]");
    if (!btn) return;
    var el = document.getElementById(btn.getAttribute("data-copy"));
    if (!el || !navigator.clipboard) return;
    navigator.clipboard.writeText(el.textContent.trim()).then(function () {
      btn.textContent = "Copied";
    });
  });

  // A table with data-live-src receives new rows over server-sent events.
  // The server sends each row already rendered, so this script holds no markup.
  document.querySelectorAll("[data-live-src]").forEach(function (tbody) {
    var status = document.querySelector("[data-live-status]");
    var src = new EventSource(tbody.getAttribute("data-live-src"));
    var setStatus = function (text, cls) {
      if (!status) return;
      status.textContent = text;
      status.className = "live " + cls;
    };
    src.addEventListener("open", function () { setStatus("Live", "on"); });
    src.addEventListener("error", function () { setStatus("Reconnecting…", "off"); });
    src.addEventListener("row", function (ev) {
      var empty = tbody.querySelector("[data-empty]");
      if (empty) empty.remove();
      tbody.insertAdjacentHTML("afterbegin", ev.data);
      var row = tbody.firstElementChild;
      if (row) row.classList.add("fresh");
    });
  });

  // A <pre data-tail-src> holds a command's output so far; while its step
  // runs, ask for what is new every 2 s and append it. The answer says when
  // the step is over: then reload once, so the page shows what came of it.
  document.querySelectorAll("[data-tail-src]").forEach(function (pre) {
    var src = pre.getAttribute("data-tail-src");
    var offset = parseInt(pre.getAttribute("data-tail-offset"), 10) || 0;
    var section = pre.closest("section") || document;
    var status = section.querySelector("[data-tail-status]");
    var label = status ? status.textContent : "";
    var setStatus = function (text, cls) {
      if (!status) return;
      status.textContent = text;
      status.className = "live " + cls;
    };
    var poll = function () {
      var url = src + (src.indexOf("?") < 0 ? "?" : "&") + "offset=" + offset;
      fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
        .then(function (res) {
          if (!res.ok) throw new Error("HTTP " + res.status);
          return res.json();
        })
        .then(function (tail) {
          setStatus(label, "on");
          if (tail.text) {
            var empty = section.querySelector("[data-tail-empty]");
            if (empty) empty.remove();
            var atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
            pre.appendChild(document.createTextNode(tail.text));
            if (atEnd) pre.scrollTop = pre.scrollHeight;
          }
          offset = tail.next;
          if (tail.done) {
            setStatus("finished, reloading…", "on");
            window.location.reload();
            return;
          }
          window.setTimeout(poll, 2000);
        })
        .catch(function () {
          setStatus("connection lost, retrying…", "off");
          window.setTimeout(poll, 5000);
        });
    };
    window.setTimeout(poll, 1000);
  });

  // An element with data-refresh-src is a live part of its page (the
  // daemons grid, a pipeline's picture): every 2 s while the page is
  // visible, its source is fetched again and swapped in place. The server
  // renders it, so this script holds no markup; a source that answers with
  // a whole element carrying data-refresh-src gives that element's content.
  document.querySelectorAll("[data-refresh-src]").forEach(function (el) {
    var src = el.getAttribute("data-refresh-src");
    var status = document.querySelector("[data-refresh-status]");
    var setStatus = function (text, cls) {
      if (!status) return;
      status.textContent = text;
      status.className = "live " + cls;
    };
    var tick = function () {
      if (document.hidden) return window.setTimeout(tick, 2000);
      fetch(src, { headers: { Accept: "text/html" }, credentials: "same-origin" })
        .then(function (res) {
          if (!res.ok) throw new Error("HTTP " + res.status);
          return res.text();
        })
        .then(function (html) {
          var fresh = document.createElement("div");
          fresh.innerHTML = html;
          var inner = fresh.querySelector("[data-refresh-src]");
          el.innerHTML = inner ? inner.innerHTML : html;
          setStatus("Live", "on");
          window.setTimeout(tick, 2000);
        })
        .catch(function () {
          setStatus("Reconnecting…", "off");
          window.setTimeout(tick, 5000);
        });
    };
    window.setTimeout(tick, 2000);
  });
})();
