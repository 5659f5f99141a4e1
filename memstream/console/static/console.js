// The console's only script: follows GET /events on the live page. Everything it shows is set as
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
  const parts = [event.change, memory.type, memory.scope, event.cause, event.ts];
  meta.textContent = parts.filter(Boolean).join(" · ");
  item.append(text, meta);
  return item;
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

document.addEventListener("DOMContentLoaded", () => {
  const live = document.getElementById("live");
  if (live) followLive(live);
});
