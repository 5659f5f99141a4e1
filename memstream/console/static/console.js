// The console's only script: follows GET /events on the live page, asks before a removal, and
// gives the keyboard "/" for the search box and "j"/"k" to move between rows. Everything it shows is set as
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

document.addEventListener("DOMContentLoaded", () => {
  const live = document.getElementById("live");
  if (live) followLive(live);
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }
  document.addEventListener("keydown", keyboard);
});
