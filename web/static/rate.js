// lineup rate: the rater's page. It draws what the server sends (every text
// through textContent, never as markup) and sends the rater's gestures; the
// vote queue itself lives on the server (core.vote_queue), so this page holds
// nothing about who wrote what.
"use strict";
(function () {
  const base = location.pathname.replace(/\/+$/, "");
  const $ = (id) => document.getElementById(id);
  let view = null;
  let busy = false;
  let ranking = null;       // labels best to worst while ranking (n)
  let tagNext = false;      // g pressed: the next label key tags that answer
  let confirmFor = null;    // the vote that a warning asks to confirm
  let note = "";

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }

  function say(text) { $("message").textContent = text || ""; }

  async function send(action, body) {
    if (busy) return;
    busy = true;
    try {
      const r = await fetch(base + "/" + action, {
        method: "POST", headers: { "Content-Type": "application/json" }, cache: "no-store",
        body: JSON.stringify(Object.assign({ handle: view ? view.handle : null }, body || {})),
      });
      const data = await r.json();
      if (!r.ok) { if (data.view) draw(data.view); say(data.error || "Not saved."); return null; }
      draw(data);
      return data;
    } catch (e) {
      say("Not saved: the server cannot be reached. Try again.");
      return null;
    } finally { busy = false; }
  }

  async function load() {
    try {
      const r = await fetch(base + "/state", { cache: "no-store" });
      if (!r.ok) { say("This link does not work (any more)."); return; }
      draw(await r.json());
    } catch (e) { say("The server cannot be reached."); }
  }

  function vote(choice, rank) {
    if (!view || view.state !== "vote") return;
    const confirm = confirmFor !== null && confirmFor === JSON.stringify([choice, rank || null]);
    confirmFor = null;
    send("vote", { choice: choice, ranking: rank || null, note: note || null, confirm: confirm }).then((d) => {
      if (!d) return;
      if (d.confirm) { confirmFor = JSON.stringify([choice, rank || null]); return; }
      note = ""; $("note").value = "";
    });
  }

  function drawRank() {
    const line = $("rank-line");
    line.hidden = ranking === null;
    if (ranking !== null) line.textContent = "ranking: " + (ranking.join(" > ") || "press labels best to worst") +
      " · Enter saves · Esc starts over";
  }

  function draw(v) {
    view = v;
    ranking = null; tagNext = false;
    drawRank();
    const p = v.progress || { done: 0, total: 0 };
    $("progress").textContent = v.state === "done" ? "all done: " + p.done + " of " + p.total
      : "case " + Math.min(p.done + 1, p.total) + " of " + p.total;
    $("case").textContent = [v.case, v.category ? "(" + v.category + ")" : null, note ? "note set" : null]
      .filter(Boolean).join(" ");
    say(v.message);
    const panes = $("panes");
    panes.replaceChildren();
    panes.className = "n" + ((v.panes || []).length);
    for (const pane of v.panes || []) {
      const box = el("article", "pane");
      box.dataset.label = pane.label;
      const h = el("h2");
      h.append(el("span", "label", pane.label));
      if (v.names && v.names[pane.label]) h.append(el("span", "name", v.names[pane.label]));
      h.append(el("span", "status", pane.status));
      const tag = el("button", "tag", "tag");
      tag.type = "button";
      tag.title = "m then " + pane.label.toLowerCase();
      tag.addEventListener("click", () => openTags(pane.label));
      h.append(tag);
      box.append(h);
      for (const e of pane.entries) box.append(el("div", "entry " + e.role, e.text));
      const mine = (v.mine || {})[pane.label] || [];
      if (mine.length) box.append(el("div", "mine", "your tags: " + mine.join(", ")));
      if (v.checks && v.checks[pane.label]) box.append(el("div", "checks", v.checks[pane.label]));
      if ((v.dimensions || []).length) box.append(scoreRows(v, pane.label));
      panes.append(box);
    }
    const choices = $("choices");
    choices.replaceChildren();
    if (v.state === "vote") {
      for (const label of v.labels) choices.append(button(label, "pick", () => vote(label), label + " is best (" + label.toLowerCase() + ")"));
      choices.append(button("tie", "", () => vote("tie"), "t"));
      choices.append(button(v.bad.replace("_", " "), "", () => vote(v.bad), "x"));
      if (v.rank) choices.append(button("rank…", "", startRank, "n"));
    }
    $("skip").disabled = v.state !== "vote";
    $("next").disabled = v.state !== "voted";
    $("note-button").disabled = v.state !== "vote";
    const after = $("after");
    after.hidden = v.state !== "voted";
    $("voted").textContent = v.voted || "";
    $("reference").textContent = v.reference ? "reference: " + v.reference : "";
    if (v.state === "done") {
      panes.append(el("p", "hint", p.total ? "Every case given to you has your vote. Thank you." :
        "Nothing to vote on here (yet)."));
    }
  }

  // The session's dimensions: a row of 1-5 per dimension under each answer,
  // this rater's own score pressed; a press saves it (before or after the vote).
  function scoreRows(v, label) {
    const box = el("div", "scores");
    const mine = (v.scores || {})[label] || {};
    for (const d of v.dimensions) {
      const row = el("div", "score-row");
      row.setAttribute("role", "group");
      const shown = d.name.replace(/_/g, " ");
      row.setAttribute("aria-label", shown + " of " + label);
      const name = el("span", "dim", shown);
      if (d.description) name.title = d.description;
      row.append(name);
      for (let n = 1; n <= 5; n++) {
        const b = button(String(n), mine[d.name] === n ? "score on" : "score",
          () => send("score", { label: label, dimension: d.name, value: n }), shown + " " + n + " of 5");
        b.setAttribute("aria-pressed", mine[d.name] === n ? "true" : "false");
        b.setAttribute("aria-label", shown + " " + n + " of 5");
        row.append(b);
      }
      box.append(row);
    }
    return box;
  }

  function button(text, cls, fn, title) {
    const b = el("button", cls, text);
    b.type = "button";
    if (title) b.title = title;
    b.addEventListener("click", fn);
    return b;
  }

  function startRank() { if (view && view.state === "vote" && view.rank) { ranking = []; drawRank(); } }

  function saveRank() {
    if (ranking === null) return;
    const left = view.labels.filter((l) => !ranking.includes(l));
    if (left.length > 1) { say("Rank every answer but the last (" + left.join(", ") + " left)."); return; }
    const full = ranking.concat(left);
    ranking = null; drawRank();
    vote(full[0], full);
  }

  function openTags(label) {
    if (!view || !view.panes) return;
    const dialog = $("tagger");
    const mine = new Set((view.mine || {})[label] || []);
    $("tag-title").textContent = "Tags of " + label;
    const list = $("tag-list");
    list.replaceChildren();
    for (const t of view.tags) {
      const row = el("label");
      const box = el("input");
      box.type = "checkbox"; box.value = t; box.checked = mine.has(t);
      row.append(box, document.createTextNode(" " + t.replace(/_/g, " ")));
      list.append(row);
    }
    dialog.returnValue = "";
    dialog.onclose = () => {
      if (dialog.returnValue !== "save") return;
      const boxes = Array.from(list.querySelectorAll("input"));
      const tags = boxes.filter((b) => b.checked && !mine.has(b.value)).map((b) => b.value);
      const removed = boxes.filter((b) => !b.checked && mine.has(b.value)).map((b) => b.value);
      if (tags.length || removed.length) send("tag", { label: label, tags: tags, removed: removed });
    };
    dialog.showModal();
  }

  function keepNote() {
    note = $("note").value.trim();
    $("note").hidden = true;
    if (view) draw(view);
  }

  document.addEventListener("keydown", (ev) => {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.target === $("note")) {
      if (ev.key === "Enter") { ev.preventDefault(); keepNote(); }
      else if (ev.key === "Escape") { $("note").hidden = true; }
      return;
    }
    if ($("tagger").open || !view) return;
    const k = ev.key.length === 1 ? ev.key.toLowerCase() : ev.key;
    const label = k.length === 1 ? k.toUpperCase() : null;
    const onScreen = label && view.labels && view.labels.includes(label);
    if (tagNext) { tagNext = false; if (onScreen) { ev.preventDefault(); openTags(label); } return; }
    if (k === "m" && view.panes) { tagNext = true; ev.preventDefault(); return; }
    if (ranking !== null) {
      ev.preventDefault();
      if (onScreen && !ranking.includes(label)) { ranking.push(label); drawRank(); if (ranking.length === view.labels.length) saveRank(); }
      else if (k === "Enter") saveRank();
      else if (k === "Escape") { ranking = null; drawRank(); }
      return;
    }
    if (view.state === "vote") {
      if (onScreen) { ev.preventDefault(); vote(label); return; }
      if (k === "t") { ev.preventDefault(); vote("tie"); return; }
      if (k === "x") { ev.preventDefault(); vote(view.bad); return; }
      if (k === "n") { ev.preventDefault(); startRank(); return; }
      if (k === "s") { ev.preventDefault(); send("skip"); return; }
      if (k === "o") { ev.preventDefault(); $("note").hidden = false; $("note").value = note; $("note").focus(); return; }
    } else if (view.state === "voted" && (k === "Enter" || k === " ")) {
      ev.preventDefault(); send("next"); return;
    }
    if (k === "u") { ev.preventDefault(); send("undo"); return; }
    if (k === "?") { $("help").hidden = !$("help").hidden; }
  });

  $("skip").addEventListener("click", () => send("skip"));
  $("undo").addEventListener("click", () => send("undo"));
  $("next").addEventListener("click", () => send("next"));
  $("note-button").addEventListener("click", () => { $("note").hidden = false; $("note").value = note; $("note").focus(); });
  $("note").addEventListener("blur", () => { if (!$("note").hidden) keepNote(); });
  $("help-toggle").addEventListener("click", () => { $("help").hidden = !$("help").hidden; });
  load();
})();
