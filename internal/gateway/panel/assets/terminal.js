// berth's panel: the terminal of a sandbox's page (issue 18). xterm.js
// (vendored, scripts/vendor-xterm) draws it; a WebSocket to the gateway
// carries keys (binary messages) and sizes (text) one way and the shell's
// output the other. The Terminal is window.berthTerminal, for tests.
(function () {
  "use strict";

  var el = document.getElementById("terminal");
  var section = document.getElementById("terminal-section");
  var status = document.getElementById("terminal-status");
  if (!el || !section || typeof Terminal === "undefined") {
    return;
  }
  var term = null;
  var ws = null;

  function say(msg) {
    status.textContent = msg;
  }

  // Columns and rows that fit the element, from xterm's own cell size.
  function fit() {
    var core = term._core;
    var cell = core && core._renderService && core._renderService.dimensions.css.cell;
    if (!cell || !cell.width || !cell.height) {
      return;
    }
    var cols = Math.max(20, Math.floor(el.clientWidth / cell.width) - 1);
    var rows = Math.max(5, Math.floor(el.clientHeight / cell.height));
    if (cols !== term.cols || rows !== term.rows) {
      term.resize(cols, rows);
    }
  }

  function open() {
    if (ws && ws.readyState <= 1) {
      term.focus();
      return;
    }
    section.hidden = false;
    if (!term) {
      term = new Terminal({ cursorBlink: true, fontSize: 14, scrollback: 5000 });
      term.open(el);
      window.berthTerminal = term;
      term.onData(function (data) {
        if (ws && ws.readyState === 1) {
          ws.send(new TextEncoder().encode(data));
        }
      });
      term.onResize(function (size) {
        if (ws && ws.readyState === 1) {
          ws.send(JSON.stringify({ cols: size.cols, rows: size.rows }));
        }
      });
      window.addEventListener("resize", fit);
    }
    fit();
    var url = new URL(el.getAttribute("data-terminal"), location.href);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    url.searchParams.set("cols", term.cols);
    url.searchParams.set("rows", term.rows);
    say("Connecting…");
    ws = new WebSocket(url.toString());
    ws.binaryType = "arraybuffer";
    ws.onopen = function () {
      say("Connected.");
      term.focus();
    };
    ws.onmessage = function (e) {
      term.write(typeof e.data === "string" ? e.data : new Uint8Array(e.data));
    };
    ws.onclose = function (e) {
      say(e.code === 1000 ? "The shell ended." : "The terminal closed: reload the page to see why, or open it again.");
    };
  }

  // Delegated: the button is in the page's live region, which is redrawn.
  document.addEventListener("click", function (e) {
    if (e.target && e.target.id === "terminal-open") {
      open();
    }
  });
})();
