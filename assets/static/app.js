// Gantry's own small script: live log tail, confirmations, copy buttons.
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
})();
