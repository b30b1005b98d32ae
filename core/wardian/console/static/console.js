// The web console's only script (served from this origin; the Content-Security-Policy allows no other).
// Live views: each element with data-live opens a Server-Sent Events stream and applies the rows the app sends.
// Forms with class js-act post in the background and show the app's answer in place; without this script they
// post as ordinary forms and the server answers with a page.
"use strict";

(() => {
  const live = document.getElementById("live");
  const streams = new Set();

  function setLive() {
    if (!live) return;
    let state = streams.size ? "on" : "off";
    for (const s of streams) {
      if (s.readyState === EventSource.CONNECTING) state = "reconnecting";
    }
    live.dataset.state = state;
  }

  function element(html) {
    const template = document.createElement("template");
    template.innerHTML = html.trim();
    return template.content.firstElementChild;
  }

  function child(container, key) {
    for (const el of container.children) {
      if (el.dataset.key === key) return el;
    }
    return null;
  }

  function applyPatch(container, patch) {
    if (typeof patch.replace === "string") {
      container.innerHTML = patch.replace;
    }
    for (const key of patch.remove || []) {
      const el = child(container, key);
      if (el) el.remove();
    }
    const descending = container.dataset.order === "desc";
    for (const row of patch.upsert || []) {
      const el = element(row.html);
      const old = child(container, row.key);
      if (old) {
        old.replaceWith(el);
        continue;
      }
      let before = null;
      for (const other of container.children) {
        const seq = Number(other.dataset.seq);
        if (descending ? seq < row.seq : seq > row.seq) {
          before = other;
          break;
        }
      }
      container.insertBefore(el, before);
    }
    if (typeof patch.pager === "string") {
      const pager = document.getElementById("pager");
      if (pager) pager.innerHTML = patch.pager;
    }
    container.dispatchEvent(new CustomEvent("wardian:patched", { bubbles: true }));
  }

  for (const container of document.querySelectorAll("[data-live]")) {
    if (!container.dataset.live) continue;
    const source = new EventSource(container.dataset.live);
    streams.add(source);
    source.addEventListener("open", setLive);
    source.addEventListener("error", setLive);
    source.addEventListener("patch", (event) => applyPatch(container, JSON.parse(event.data)));
    source.addEventListener("end", (event) => {
      source.close();
      streams.delete(source);
      setLive();
      const why = JSON.parse(event.data);
      if (live) {
        live.dataset.state = why.reason === "logged_out" ? "logged-out" : "off";
        live.title = why.message || why.reason;
      }
    });
  }
  setLive();

  // Delegated: rows re-rendered by a live stream bring new forms.
  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.classList.contains("js-act")) return;
    {
      event.preventDefault();
      const submitter = event.submitter;
      const action = submitter && submitter.hasAttribute("formaction") ? submitter.formAction : form.action;
      const target = document.querySelector(form.dataset.result || "#flash");
      // Read before the buttons are disabled: a disabled submitter's name=value is left out of the form data.
      const body = new FormData(form, submitter);
      const buttons = form.querySelectorAll("button");
      buttons.forEach((b) => { b.disabled = true; });
      form.classList.add("busy");
      try {
        const response = await fetch(action, {
          method: "POST",
          body, // with the pressed button's name=value, as a plain post sends it
          headers: { "X-Console-Fragment": "1" },
          credentials: "same-origin",
        });
        const html = await response.text();
        if (target) target.innerHTML = html;
        if (response.ok && form.dataset.reset) {
          const field = form.elements.namedItem(form.dataset.reset);
          if (field) field.value = "";
        }
      } catch (err) {
        if (target) target.textContent = "The console did not answer: " + err;
      } finally {
        buttons.forEach((b) => { b.disabled = false; });
        form.classList.remove("busy");
      }
    }
  });
})();
