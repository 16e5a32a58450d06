// berth's panel: a little script on top of pages that work without it.
// It keeps the regions marked data-live current by reading the page
// again every two seconds, asks before a form marked data-confirm is sent,
// and shows only the create form's fields for the purpose chosen.
(function () {
  "use strict";

  document.addEventListener("submit", function (e) {
    var msg = e.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) {
      e.preventDefault();
    }
  });

  // The create form: the engineer's fields or the agent's.
  var purposes = document.querySelectorAll("input[name=purpose]");
  function showPurpose() {
    var agent = document.querySelector("input[name=purpose][value=agent]");
    if (!agent) {
      return;
    }
    var purpose = agent.checked ? "agent" : "engineer";
    document.querySelectorAll(".for-agent").forEach(function (el) { el.hidden = !agent.checked; });
    document.querySelectorAll(".for-engineer").forEach(function (el) { el.hidden = agent.checked; });
    // A class not for this purpose cannot be chosen; one the quota refuses
    // stays refused (the server marked it so).
    document.querySelectorAll("input[name=class][data-purposes]").forEach(function (el) {
      if (el.closest(".refused")) {
        return;
      }
      var fits = el.getAttribute("data-purposes").split(" ").indexOf(purpose) >= 0;
      el.disabled = !fits;
      el.closest(".class-choice").classList.toggle("unfit", !fits);
      if (!fits && el.checked) {
        el.checked = false;
      }
    });
    if (!document.querySelector("input[name=class]:checked")) {
      var first = document.querySelector("input[name=class]:not(:disabled)");
      if (first) {
        first.checked = true;
      }
    }
  }
  purposes.forEach(function (el) { el.addEventListener("change", showPurpose); });
  showPurpose();

  // The extend form says when a typed lifetime would end, and whether
  // that is earlier than the sandbox's expiry now (the server asks to
  // confirm that, and cuts a lifetime to the ceilings it knows).
  var ttl = document.querySelector("form.extend input[name=ttl][data-expires]");
  var ttlNew = document.getElementById("ttl-new");
  function lifetime(s) {
    var m = /^\s*(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?\s*$/.exec(s);
    if (!m || !(m[1] || m[2] || m[3] || m[4])) {
      return null;
    }
    return (((+(m[1] || 0) * 24 + +(m[2] || 0)) * 60 + +(m[3] || 0)) * 60 + +(m[4] || 0)) * 1000;
  }
  function utc(d) {
    return d.toISOString().slice(0, 16).replace("T", " ") + " UTC";
  }
  function showNew() {
    var d = lifetime(ttl.value);
    if (d === null) {
      ttlNew.hidden = true;
      return;
    }
    var at = new Date(Date.now() + d);
    var now = new Date(ttl.getAttribute("data-expires"));
    ttlNew.textContent = "It would expire " + utc(at) + (at < now ? ": earlier than it expires now, so this shortens it (you are asked first)." : ".");
    ttlNew.classList.toggle("warn", at < now);
    ttlNew.hidden = false;
  }
  if (ttl && ttlNew) {
    ttl.addEventListener("input", showNew);
    showNew();
  }

  // A run's log shows its end, where the run is.
  function toEnd() {
    document.querySelectorAll("pre.log, .transcript").forEach(function (el) { el.scrollTop = el.scrollHeight; });
  }
  toEnd();

  var live = document.querySelectorAll("[data-live][id]");
  if (!live.length) {
    return;
  }
  var busy = false;
  function refresh() {
    if (busy || document.hidden) {
      return;
    }
    busy = true;
    fetch(location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (res) {
        if (res.redirected) {
          location.reload(); // signed out meanwhile: show the sign-in page
          return null;
        }
        return res.ok ? res.text() : null;
      })
      .then(function (html) {
        if (!html) {
          return;
        }
        var doc = new DOMParser().parseFromString(html, "text/html");
        live.forEach(function (el) {
          var fresh = doc.getElementById(el.id);
          // Never replace what holds the keyboard's focus: try again next time.
          if (!fresh || fresh.innerHTML === el.innerHTML || el.contains(document.activeElement)) {
            return;
          }
          el.innerHTML = fresh.innerHTML;
        });
        toEnd();
      })
      .catch(function () {})
      .then(function () { busy = false; });
  }
  setInterval(refresh, 2000);
  document.addEventListener("visibilitychange", refresh);
})();
