// The console's only script: follows GET /events on the live page, asks before a removal, previews the
// injected-context settings as they are chosen (nothing saved), and gives the keyboard "/" for the search box and "j"/"k" to move between rows. Everything it shows is set as
// text (textContent), never as markup, so a memory's text cannot run or load anything.
"use strict";

function liveItem(event) {
  const memory = event.memory || {};
  const item = document.createElement("li");
  item.className = "memory";
  const text = document.createElement("p");
  text.className = "text";
  if (event.change !== "deleted" && memory.id) {
    const link = document.createElement("a");
    link.href = "/console/memories/" + encodeURIComponent(memory.id);
    link.textContent = memory.text || memory.id;
    text.appendChild(link);
  } else {
    text.textContent = memory.text || "(forgotten: its text is not announced)";
  }
  const meta = document.createElement("p");
  meta.className = "meta";
  const where = memory.scope === "user" ? "your user scope" : (memory.project || memory.scope_key);
  const sources = (memory.sources || []).map((s) => s.source_type).filter(Boolean);
  const parts = [event.change, memory.type, readableTime(event.ts), where, sources[0], event.cause];
  meta.textContent = parts.filter(Boolean).join(" · ");
  item.append(text, meta);
  return item;
}

function readableTime(iso) {
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return "";
  const pad = (n) => String(n).padStart(2, "0");
  return `${at.getFullYear()}-${pad(at.getMonth() + 1)}-${pad(at.getDate())} ${pad(at.getHours())}:${pad(at.getMinutes())}:${pad(at.getSeconds())}`;
}

function followLive(list) {
  const state = document.getElementById("live-state");
  const stream = new EventSource(list.dataset.stream);
  stream.addEventListener("open", () => { state.textContent = "following"; });
  stream.addEventListener("error", () => { state.textContent = "reconnecting…"; });
  stream.addEventListener("dropped", () => { state.textContent = "fell behind: reconnecting…"; });
  stream.addEventListener("memory-updated", (message) => {
    list.prepend(liveItem(JSON.parse(message.data)));
    while (list.children.length > 200) list.lastElementChild.remove();
  });
}

function keyboard(event) {
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName);
  if (typing || event.ctrlKey || event.metaKey || event.altKey) return;
  if (event.key === "/") {
    const box = document.getElementById("q");
    if (box) { event.preventDefault(); box.focus(); }
    return;
  }
  if (event.key !== "j" && event.key !== "k") return;
  const links = Array.from(document.querySelectorAll("ol.memories p.text a"));
  if (!links.length) return;
  const at = links.indexOf(document.activeElement);
  const next = event.key === "j" ? Math.min(at + 1, links.length - 1) : Math.max(at - 1, 0);
  links[next].focus();
  event.preventDefault();
}

function hostDetails(host) {
  const details = document.createElement("details");
  details.className = "host";
  details.dataset.host = host.host;
  const summary = document.createElement("summary");
  summary.textContent = `${host.host}: ${host.output ? "prints the block below" : host.why}`;
  details.appendChild(summary);
  if (host.output) {
    const pre = document.createElement("pre");
    pre.className = "hook";
    pre.textContent = host.output;
    details.appendChild(pre);
  }
  return details;
}

function previewSettings(form) {
  // The block the unsaved choices would give: POSTed with the form's CSRF token, answered as JSON, never saved.
  const section = document.getElementById("settings-preview");
  if (!section) return;
  const tokens = section.querySelector(".preview-tokens");
  const block = section.querySelector(".preview-block");
  const hosts = section.querySelector(".hosts");
  let timer = null;
  let asked = 0;
  async function ask() {
    const mine = ++asked;
    section.hidden = false;
    section.setAttribute("aria-busy", "true");
    try {
      const reply = await fetch(form.dataset.preview, {
        method: "POST",
        headers: { Accept: "application/json" },
        body: new URLSearchParams(new FormData(form)),
        credentials: "same-origin",
      });
      if (mine !== asked) return; // a later choice was made meanwhile: its answer is the one to show
      if (!reply.ok) {
        const page = new DOMParser().parseFromString(await reply.text(), "text/html");
        const why = page.querySelector(".error");
        tokens.textContent = `No preview: ${why ? why.textContent : reply.status}`;
        block.textContent = "";
        hosts.replaceChildren();
        return;
      }
      const shown = await reply.json();
      tokens.textContent = `About ${shown.tokens} tokens of a budget of ${shown.budget} (${shown.settings}): ` +
        "what the next session would get with these choices. Nothing is saved until Save.";
      block.textContent = shown.text || "(empty: nothing would be injected)";
      hosts.replaceChildren(...shown.hosts.map(hostDetails));
    } finally {
      if (mine === asked) section.removeAttribute("aria-busy");
    }
  }
  const soon = () => { clearTimeout(timer); timer = setTimeout(ask, 250); };
  form.addEventListener("change", soon);
  form.addEventListener("input", soon);
}

document.addEventListener("DOMContentLoaded", () => {
  const settings = document.querySelector("form.settings[data-preview]");
  if (settings && !settings.querySelector("[disabled]")) previewSettings(settings);
  const live = document.getElementById("live");
  if (live) followLive(live);
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }
  document.addEventListener("keydown", keyboard);
});
