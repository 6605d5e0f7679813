// skein's web UI: refreshes a page's <main> in place every few seconds
// (main's data-refresh), so scrolling and the rest of the page stay put.
// A page whose session ended is reloaded, which leads to the login page.
"use strict";
(function () {
  const main = document.querySelector("main[data-refresh]");
  if (!main) {
    return;
  }
  const every = Number(main.dataset.refresh) * 1000;
  const scrollLogs = () => {
    for (const log of document.querySelectorAll("pre.log")) {
      log.scrollTop = log.scrollHeight;
    }
  };
  // A form being filled in (a cordon reason) is not refreshed away.
  const busy = () => {
    const el = document.activeElement;
    return el && main.contains(el) && (el.tagName === "INPUT" || el.tagName === "BUTTON");
  };
  async function refresh() {
    if (document.hidden || busy()) {
      return;
    }
    const resp = await fetch(location.href, { credentials: "same-origin", cache: "no-store" });
    if (resp.redirected || !resp.ok) {
      location.reload();
      return;
    }
    const doc = new DOMParser().parseFromString(await resp.text(), "text/html");
    const fresh = doc.querySelector("main");
    if (fresh) {
      main.replaceChildren(...fresh.childNodes);
      document.title = doc.title;
      scrollLogs();
    }
  }
  async function loop() {
    try {
      await refresh();
    } catch (e) {
      // The node is unreachable for now: the next round tries again.
      main.classList.add("stale");
      setTimeout(loop, every);
      return;
    }
    main.classList.remove("stale");
    setTimeout(loop, every);
  }
  scrollLogs();
  setTimeout(loop, every);
})();
