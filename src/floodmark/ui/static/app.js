// floodmark ui: draws the server's snapshots (GET /api/events, server-sent events).
// Vanilla JS + SVG, no build step. Every value the page shows is also on a data attribute
// (data-broker, data-leo, data-hw, data-isr, ...) so tests and scripts can read the page.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const BOX_W = 22, GAP = 2, STEP = BOX_W + GAP, ELIDE_W = 46, WINDOW = 40;
const BOX_Y = 16, BOX_H = 20;
const EPOCH_COLORS = ["#1565c0", "#6a1b9a", "#00838f", "#ef6c00", "#2e7d32", "#ad1457",
                      "#4e342e", "#283593"];

const state = { snapshot: null, selected: null, renders: 0, partitionKey: null,
                lastSeen: new Map() };

function el(tag, attrs = {}, text) {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4))
                                      : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v !== undefined && v !== null) node.setAttribute(k, String(v));
  }
  if (text !== undefined) node.textContent = text;
  return node;
}

function bump(node) {
  node.classList.remove("bump");
  void node.getBoundingClientRect();  // restart the animation
  node.classList.add("bump");
}

function setData(node, key, value) {
  const text = value === null || value === undefined ? "" : String(value);
  const changed = node.dataset[key] !== undefined && node.dataset[key] !== text;
  node.dataset[key] = text;
  return changed;
}

function keyOf(p) { return `${p.topic}-${p.partition}`; }

// A URL per view: ?topic=T&partition=P (the partition drawn and browsed) and the message
// browser's from=latest|offset|timestamp, offset=N, ts=MS, key=TEXT, format=text|json|hex,
// limit=N. A link opens the same view.
function readSelection() {
  const q = new URLSearchParams(location.search);
  if (q.has("topic")) return { topic: q.get("topic"), partition: Number(q.get("partition") || 0) };
  return null;
}

function writeUrl() {
  const q = new URLSearchParams();
  if (state.selected) {
    q.set("topic", state.selected.topic);
    q.set("partition", String(state.selected.partition));
  }
  const b = browserForm();
  if (b.from !== "latest") q.set("from", b.from);
  if (b.from === "offset" && b.offset !== "") q.set("offset", b.offset);
  if (b.from === "timestamp" && b.ts !== null) q.set("ts", String(b.ts));
  if (b.key) q.set("key", b.key);
  if (b.format !== "text") q.set("format", b.format);
  if (b.limit !== "50" && b.limit !== "") q.set("limit", b.limit);
  if (configsView.kind) q.set("configs", `${configsView.kind}:${configsView.name}`);
  if (sim.inUrl && sim.data) {  // the scenario replay, once the user picked or stepped it
    q.set("scenario", sim.data.scenario);
    q.set("truncation", sim.data.truncation);
    q.set("step", String(sim.index + 1));
  }
  const search = q.toString();
  history.replaceState(null, "", search ? `?${search}` : location.pathname);
}

function select(topic, partition, byUser = true) {
  const same = state.selected && state.selected.topic === topic && state.selected.partition === partition;
  state.selected = { topic, partition };
  if (byUser && !same) {  // another partition: browse its newest records
    document.getElementById("msg-from").value = "latest";
    document.getElementById("msg-offset").value = "";
  }
  writeUrl();
  if (!same) {
    connect();  // the stream asks the brokers for the partition on screen only
    loadMessages();
  }
  if (byUser && state.snapshot) render(state.snapshot);
}

// -- cluster ------------------------------------------------------------------------------------
function renderCluster(cluster) {
  const ctl = document.getElementById("controller");
  ctl.replaceChildren();
  if (!cluster) return;
  if (cluster.controller) {
    const c = cluster.controller;
    ctl.dataset.alive = String(c.alive);
    ctl.append(el("span", {}, `controller ${c.id} at ${c.address} — ${c.state}` +
      (c.metadata_offset !== null && c.metadata_offset !== undefined
        ? `, metadata log offset ${c.metadata_offset}` : "")));
    if (c.quorum) {
      // The controller quorum drawn like a partition's leader view: the leader's epoch and
      // HW, and each voter's LEO with its lag behind the leader.
      const q = c.quorum;
      const line = el("div", { class: "quorum", id: "quorum",
        "data-leader": q.leader_id ?? "", "data-epoch": q.leader_epoch ?? "",
        "data-hw": q.high_watermark ?? "" });
      line.append(el("span", {}, q.leader_id !== null && q.leader_id !== undefined
        ? `quorum: leader ${q.leader_id}, epoch ${q.leader_epoch}, HW ${q.high_watermark}`
        : "quorum: no leader (election in progress)"));
      for (const v of q.voters) {
        line.append(el("span", { class: "voter", "data-voter": v.id,
          "data-leo": v.log_end_offset ?? "", "data-lag": v.lag ?? "" },
          ` · voter ${v.id}: LEO ${(v.log_end_offset ?? -1) >= 0 ? v.log_end_offset : "?"}` +
          ((v.lag ?? -1) >= 0 && (v.log_end_offset ?? -1) >= 0 ? ` (lag ${v.lag})` : "") +
          (v.state && v.state !== "running" ? ` [${v.state}]` : "")));
      }
      ctl.append(line);
    }
  } else {
    ctl.append(el("span", { class: "muted" },
      "controller: not visible over the Kafka protocol (use --data-dir for a local cluster)"));
  }
  const box = document.getElementById("brokers");
  box.replaceChildren();
  for (const b of cluster.brokers) {
    const card = el("div", { class: "broker", id: `broker-${b.id}`, "data-broker": b.id,
      "data-alive": b.alive, "data-fenced": b.fenced, "data-broker-epoch": b.broker_epoch,
      "data-state": b.state });
    const name = el("div", { class: "name" }, `broker ${b.id}`);
    name.append(el("span", { class: `badge ${b.alive ? "good" : "bad"}` },
      b.alive ? "alive" : (b.state && b.state !== "running" ? b.state : "not alive")));
    if (b.fenced) name.append(el("span", { class: "badge bad" }, "fenced"));
    card.append(name);
    card.append(el("div", {}, `${b.address || "address unknown"}` +
      (b.broker_epoch !== null && b.broker_epoch !== undefined ? ` · broker epoch ${b.broker_epoch}` : "")));
    card.append(el("div", { class: "leads" },
      `leads ${b.leads.length}: ${b.leads.filter((n) => !n.startsWith("__")).join(", ") || "—"}`));
    const links = el("div", { class: "broker-links" });
    const cfg = el("button", { class: "configs-link", type: "button", "data-configs-broker": b.id },
      "configs");
    cfg.onclick = () => openConfigs("broker", String(b.id));
    links.append(cfg);
    card.append(links);
    if (cluster.mode === "local" && changesAllowed()) {
      const drills = el("div", { class: "drills", title: "fault drill: acts on the real process" });
      drills.append(el("span", { class: "drill-label" }, "fault drill:"));
      for (const action of ["kill", "pause", "resume", "start"]) {
        const button = el("button", { class: "drill", "data-drill": action, "data-broker": b.id }, action);
        button.disabled = (action === "start") === (b.state !== "dead") ||
          (action === "pause" && b.state !== "running") || (action === "resume" && b.state !== "stopped");
        button.onclick = () => drill(b.id, action);
        drills.append(button);
      }
      card.append(drills);
    }
    box.append(card);
  }
}

async function drill(broker, action) {
  const status = document.getElementById("drill-status");
  const what = { kill: "SIGKILL", pause: "SIGSTOP", resume: "SIGCONT", start: "start" }[action];
  if (!await askConfirm(`${action} broker ${broker}?`,
    el("div", {}, action === "start" ? `starts broker ${broker}'s process again`
                                     : `sends ${what} to broker ${broker}'s process`))) {
    return;
  }
  status.textContent = `${action} broker ${broker}…`;
  try {
    const resp = await fetch("/api/drill", { method: "POST",
      headers: { "Content-Type": "application/json", "X-Floodmark-Drill": "1" },
      body: JSON.stringify({ broker, action }) });
    const answer = await resp.json();
    status.textContent = answer.ok ? answer.message : `failed: ${answer.error}`;
    status.dataset.ok = String(Boolean(answer.ok));
  } catch (exc) {
    status.textContent = `failed: ${exc}`;
    status.dataset.ok = "false";
  }
}

// -- partition selector ---------------------------------------------------------------------------
function renderSelect(topics) {
  const partitions = [];
  for (const t of [...topics.filter((x) => !x.internal), ...topics.filter((x) => x.internal)]) {
    for (const p of t.partitions) partitions.push({ topic: t.topic, partition: p.partition });
  }
  const sel = document.getElementById("partition-select");
  const keys = partitions.map(keyOf).join("|");
  if (sel.dataset.keys !== keys) {
    sel.dataset.keys = keys;
    sel.replaceChildren(...partitions.map((p) =>
      el("option", { value: JSON.stringify([p.topic, p.partition]) }, keyOf(p))));
    sel.onchange = () => { const [t, i] = JSON.parse(sel.value); select(t, i); };
  }
  if (state.selected) sel.value = JSON.stringify([state.selected.topic, state.selected.partition]);
}

function ordered(partitions) {
  const user = partitions.filter((p) => !p.topic.startsWith("__"));
  const internal = partitions.filter((p) => p.topic.startsWith("__"));
  return [...user, ...internal];
}

// The partition a page opens on when its URL names none: the first troubled one (offline or
// under-replicated), else the first holding records, else the first; user topics before
// internal ones.
function defaultPartition(snap) {
  const rows = [];
  const topics = snap.topics || [];
  for (const t of [...topics.filter((x) => !x.internal), ...topics.filter((x) => x.internal)]) {
    for (const p of t.partitions) rows.push({ topic: t.topic, partition: p.partition, row: p });
  }
  const leo = new Map((snap.partitions || []).map((p) => [keyOf(p),
    Math.max(-1, ...p.replicas.map((r) => r.log_end_offset ?? -1))]));
  const size = (c) => Math.max(c.row.high_watermark ?? -1, leo.get(keyOf(c)) ?? -1);
  const pick = rows.find((c) => c.row.offline || c.row.under_replicated)
    || rows.find((c) => size(c) > 0) || rows[0];
  return pick ? { topic: pick.topic, partition: pick.partition } : null;
}

// -- one partition, drawn like the reference documents ---------------------------------------------
function epochOf(epochs, offset) {
  let found = null;
  for (const [epoch, start] of epochs) if (start <= offset) found = epoch;
  return found;
}

// ctx: where to draw. The live partition uses #partition-view, #replicas, #replica-N; the
// scenario replay the same drawing under #sim-view with ids prefixed "sim-".
const LIVE = { view: "partition-view", summary: "partition-summary", rows: "replicas",
               leaderView: "leader-view", prefix: "", leaderFirst: true, keyField: "partitionKey" };
const SIM = { view: "sim-view", summary: "sim-summary", rows: "sim-replicas",
              leaderView: "sim-leader-view", prefix: "sim-", leaderFirst: false, keyField: "simKey" };

function renderPartition(p, brokers, ctx = LIVE, values = null) {
  const view = document.getElementById(ctx.view);
  const summary = document.getElementById(ctx.summary);
  const rows = document.getElementById(ctx.rows);
  const key = keyOf(p);
  const P = ctx.prefix;
  if (state[ctx.keyField] !== key) {
    rows.replaceChildren();
    for (const k of Object.keys(view.dataset)) delete view.dataset[k];
    state[ctx.keyField] = key;
  }
  const leaderRow = p.replicas.find((r) => r.broker === p.leader);
  const leaderHw = leaderRow ? leaderRow.high_watermark : null;
  if (setData(view, "leaderEpoch", p.leader_epoch)) bump(summary);
  setData(view, "topic", p.topic);
  setData(view, "partition", p.partition);
  setData(view, "leader", p.leader);
  if (setData(view, "isr", p.isr.join(","))) bump(summary);
  // KIP-966: replicas out of the ISR that may still lead (they left it below min ISR).
  const elr = p.elr || [];
  setData(view, "elr", elr.join(","));
  setData(view, "logStartOffset", p.log_start_offset);
  setData(view, "highWatermark", leaderHw);
  // The last stable offset (issue 15): a read_committed consumer reads only below it; an open
  // transaction holds it below the HW.
  const lso = p.last_stable_offset ?? null;
  setData(view, "lastStableOffset", lso);
  const held = lso !== null && leaderHw !== null && lso < leaderHw;
  view.dataset.lsoHeld = String(held);
  summary.replaceChildren(
    el("b", {}, key), " · leader ",
    el("b", { id: `${P}leader` }, p.leader === -1 || p.leader === null ? "none" : `broker ${p.leader}`),
    " · leader epoch ", el("b", { id: `${P}leader-epoch` }, p.leader_epoch),
    " · ISR ", el("b", { id: `${P}isr` }, `{${p.isr.join(", ")}}`),
    ...(elr.length ? [" · ELR ", el("b", { id: `${P}elr` }, `{${elr.join(", ")}}`)] : []),
    " · log start offset ", el("b", { id: `${P}log-start-offset` }, p.log_start_offset ?? "?"),
    " · HW ", el("b", { id: `${P}high-watermark` }, leaderHw ?? "?"),
    ...(lso === null ? [] : [" · LSO ", el("b", { id: `${P}last-stable-offset`,
      class: held ? "lso-held" : "" }, lso), held ? " (a transaction is open)" : ""]));

  // What each replica shows: its answer now or, greyed, the last one it gave (a paused or
  // dead broker's log is still on its disk).
  const shownOf = new Map();
  for (const r of p.replicas) {
    const id = `${P}${key}/${r.broker}`;
    if (r.log_end_offset !== null) {
      state.lastSeen.set(id, { ...r, seen_ms: Date.now() });
      shownOf.set(r.broker, r);
    } else if (state.lastSeen.has(id)) {
      shownOf.set(r.broker, state.lastSeen.get(id));
    }
  }
  // One offset window shared by every replica, so the boxes line up vertically.
  const leos = [...shownOf.values()].map((r) => r.log_end_offset);
  const start = p.log_start_offset ?? 0;
  const hi = Math.max(start, ...leos) + 1;
  const lo = Math.max(start, hi - WINDOW);
  const elide = lo > start ? ELIDE_W : 0;
  const x = (offset) => elide + (offset - lo) * STEP;
  const width = x(hi) + 60;
  const alive = new Map(brokers.map((b) => [b.id, b.alive]));
  const remote = p.remote_log_end_offsets || {};

  const byId = (a, b) => (a.broker < b.broker ? -1 : a.broker > b.broker ? 1 : 0);
  const order = [...p.replicas].sort((a, b) => (ctx.leaderFirst
    ? (b.broker === p.leader) - (a.broker === p.leader) : 0) || byId(a, b));
  for (const r of order) {
    let row = document.getElementById(`${P}replica-${r.broker}`);
    if (!row) row = makeRow(r.broker, P);
    rows.append(row);  // keeps the order: leader first
    const role = r.broker === p.leader ? "leader" : "follower";
    const reachable = r.log_end_offset !== null;
    const shown = shownOf.get(r.broker);
    row.dataset.stale = String(!reachable && shown !== undefined);
    row.dataset.role = role;
    row.dataset.alive = String(Boolean(alive.get(r.broker)) && reachable);
    row.dataset.inIsr = String(p.isr.includes(r.broker));
    const leoMoved = setData(row, "leo", r.log_end_offset);
    const hwMoved = setData(row, "hw", r.high_watermark);
    const rowLso = r.last_stable_offset ?? null;
    const lsoMoved = setData(row, "lso", rowLso);
    row.dataset.epochs = JSON.stringify(r.epochs);

    const label = row.querySelector(".label");
    const badges = [el("span", {}, `broker ${r.broker}`)];
    if (role === "leader") badges.push(el("span", { class: "badge leader" }, "leader"));
    badges.push(p.isr.includes(r.broker) ? el("span", { class: "badge good" }, "ISR")
                : elr.includes(r.broker) ? el("span", { class: "badge" }, "ELR (may lead)")
                                         : el("span", { class: "badge bad" }, "not in ISR"));
    if (!reachable) badges.push(el("span", { class: "badge bad" }, "unreachable"));
    const numbers = el("div", { class: "numbers" },
      reachable ? `LEO ${r.log_end_offset} · HW ${r.high_watermark}` +
                  (rowLso !== null && rowLso < r.high_watermark ? ` · LSO ${rowLso}` : "")
        : shown ? `last seen ${Math.round((Date.now() - shown.seen_ms) / 1000)} s ago: ` +
                  `LEO ${shown.log_end_offset} · HW ${shown.high_watermark}` : "no answer");
    const epochs = shown ? shown.epochs : [];
    const cache = el("div", { class: "epoch-cache", "data-epochs": JSON.stringify(r.epochs) },
      "epochs " + (epochs.length ? epochs.map(([e, s]) => `<${e}, ${s}>`).join(" ") : "—"));
    label.replaceChildren(el("div", {}, ""), numbers, cache);
    label.firstChild.append(...badges);
    if (leoMoved || hwMoved) bump(numbers);

    const svg = row.querySelector("svg.log");
    svg.setAttribute("width", width);
    svg.setAttribute("height", BOX_Y + BOX_H + 14);
    const boxes = svg.querySelector(".boxes");
    boxes.replaceChildren();
    if (elide) {
      boxes.append(el("svg:rect", { class: "elided", x: 0, y: BOX_Y, width: ELIDE_W - 4, height: BOX_H }));
      boxes.append(el("svg:text", { class: "offset-label", x: (ELIDE_W - 4) / 2, y: BOX_Y + 13 },
        `${start}…${lo - 1}`));
    }
    const hwMarker = svg.querySelector(".hw-marker");
    const leoMarker = svg.querySelector(".leo-marker");
    const lsoMarker = svg.querySelector(".lso-marker");
    // The LSO is drawn only where a transaction holds it below the HW; the boxes between are
    // committed (replicated) but not yet stable (read_committed stops before them).
    const shownLso = shown ? shown.last_stable_offset ?? null : null;
    const lsoHeld = shown && shownLso !== null && shownLso < shown.high_watermark;
    if (shown) {
      for (let o = lo; o < shown.log_end_offset; o++) {
        let kind = o < shown.high_watermark ? "committed" : "uncommitted";
        if (lsoHeld && o >= shownLso && o < shown.high_watermark) kind += " unstable";
        const epoch = epochOf(shown.epochs, o);
        boxes.append(el("svg:rect", { class: `offset-box ${kind}`, "data-offset": o,
          "data-epoch": epoch, x: x(o), y: BOX_Y, width: BOX_W, height: BOX_H }));
        boxes.append(el("svg:rect", { class: "epoch-bar", x: x(o), y: BOX_Y + BOX_H - 3,
          width: BOX_W, height: 3, fill: EPOCH_COLORS[(epoch ?? 0) % EPOCH_COLORS.length] }));
        const value = values && values[r.broker] ? values[r.broker][String(o)] : undefined;
        boxes.append(el("svg:text", { class: "offset-label", x: x(o) + BOX_W / 2, y: BOX_Y + 12 },
          value ?? o));
      }
      hwMarker.style.display = leoMarker.style.display = "";
      hwMarker.style.transform = `translate(${x(shown.high_watermark) - GAP / 2}px, 0px)`;
      const leoBox = leoMarker.querySelector(".leo-box");
      leoMarker.style.transform = `translate(${x(shown.log_end_offset)}px, 0px)`;
      if (reachable) {  // data attributes carry live answers only
        hwMarker.dataset.hw = r.high_watermark;
        leoBox.dataset.offset = r.log_end_offset;
        leoMarker.dataset.leo = r.log_end_offset;
      } else {
        delete hwMarker.dataset.hw;
        delete leoBox.dataset.offset;
        delete leoMarker.dataset.leo;
      }
      if (hwMoved) bump(hwMarker.querySelector(".hw-line"));
      if (leoMoved) bump(leoBox);
      if (lsoHeld) {
        lsoMarker.style.display = "";
        lsoMarker.style.transform = `translate(${x(Math.max(shownLso, lo)) - GAP / 2}px, 0px)`;
        if (reachable) lsoMarker.dataset.lso = rowLso; else delete lsoMarker.dataset.lso;
        if (lsoMoved) bump(lsoMarker.querySelector(".lso-line"));
      } else {
        lsoMarker.style.display = "none";
        delete lsoMarker.dataset.lso;
      }
    } else {
      hwMarker.style.display = leoMarker.style.display = lsoMarker.style.display = "none";
      delete lsoMarker.dataset.lso;
      delete hwMarker.dataset.hw;
      delete leoMarker.dataset.leo;
    }
    const mark = svg.querySelector(".remote-leo");
    const seen = remote[String(r.broker)];
    if (role === "follower" && seen !== undefined && seen >= 0) {
      mark.style.display = "";
      mark.dataset.leo = seen;
      mark.style.transform = `translate(${x(Math.max(seen, lo))}px, 0px)`;
    } else {
      mark.style.display = "none";
      delete mark.dataset.leo;
    }
  }
  for (const row of [...rows.children]) {
    if (!p.replicas.some((r) => `${P}replica-${r.broker}` === row.id)) row.remove();
  }
  renderLeaderView(p, leaderRow, ctx);
}

function makeRow(broker, prefix = "") {
  const row = el("div", { class: "replica", id: `${prefix}replica-${broker}`, "data-broker": broker });
  row.append(el("div", { class: "label" }));
  const svg = el("svg:svg", { class: "log" });
  svg.append(el("svg:g", { class: "boxes" }));
  const remote = el("svg:g", { class: "remote-leo-marker remote-leo moving", "data-broker": broker });
  remote.append(el("svg:path", { class: "remote-leo-mark", d: "M-5 2 L5 2 L0 10 Z" }));
  remote.append(el("svg:text", { class: "remote-leo-label", x: 7, y: 9 }, "leader's view"));
  const hw = el("svg:g", { class: "hw-marker moving" });
  hw.append(el("svg:line", { class: "hw-line", x1: 0, y1: BOX_Y - 4, x2: 0, y2: BOX_Y + BOX_H + 4 }));
  hw.append(el("svg:text", { class: "hw-label", x: -2, y: BOX_Y + BOX_H + 13,
    "text-anchor": "end" }, "HW"));
  const leo = el("svg:g", { class: "leo-marker moving" });
  leo.append(el("svg:rect", { class: "leo-box", x: 0, y: BOX_Y, width: BOX_W, height: BOX_H }));
  leo.append(el("svg:text", { class: "leo-label", x: 2, y: BOX_Y + BOX_H + 13 }, "LEO"));
  const lso = el("svg:g", { class: "lso-marker moving" });
  lso.append(el("svg:line", { class: "lso-line", x1: 0, y1: BOX_Y - 8, x2: 0, y2: BOX_Y + BOX_H + 4 }));
  lso.append(el("svg:text", { class: "lso-label", x: 0, y: BOX_Y - 10,
    "text-anchor": "middle" }, "LSO"));
  lso.style.display = "none";
  svg.append(hw, lso, leo, remote);
  row.append(svg);
  return row;
}

function renderLeaderView(p, leaderRow, ctx = LIVE) {
  const box = document.getElementById(ctx.leaderView);
  box.replaceChildren();
  if (!leaderRow || leaderRow.log_end_offset === null) {
    box.append(el("div", {}, "the leader does not answer"));
    return;
  }
  box.append(el("div", {}, `What broker ${p.leader} (leader, epoch ${p.leader_epoch}) knows: ` +
    `its LEO ${leaderRow.log_end_offset}, its HW ${leaderRow.high_watermark}, and the remote ` +
    "LEO of each follower (the last fetch offset it received from it)"));
  const table = el("table", { id: `${ctx.prefix}remote-leos`, class: "remote-leos" });
  table.append(el("tr", {}), el("tr", {}));
  table.rows[0].append(el("th", {}, "replica"));
  table.rows[1].append(el("th", {}, "LEO (leader's view)"));
  const own = el("td", { class: "leader-leo", "data-broker": p.leader, "data-leo": leaderRow.log_end_offset },
    `${leaderRow.log_end_offset} (own)`);
  table.rows[0].append(el("td", {}, `broker ${p.leader}`));
  table.rows[1].append(own);
  for (const [b, leo] of Object.entries(p.remote_log_end_offsets || {})) {
    table.rows[0].append(el("td", {}, `broker ${b}`));
    table.rows[1].append(el("td", { class: "remote-leo-value", "data-broker": b, "data-leo": leo },
      leo < 0 ? "unknown" : String(leo)));
  }
  box.append(table);
}

// -- topics ------------------------------------------------------------------------------------------
function renderTopics(topics) {
  const body = document.querySelector("#topics-table tbody");
  body.replaceChildren();
  const sorted = [...topics.filter((t) => !t.internal), ...topics.filter((t) => t.internal)];
  for (const t of sorted) {
    for (const p of t.partitions) {
      const health = p.offline ? "offline" : p.under_replicated ? "under-replicated" : "ok";
      const tr = el("tr", { class: "topic-partition", "data-topic": t.topic, "data-partition": p.partition,
        "data-leader": p.leader, "data-leader-epoch": p.leader_epoch, "data-isr": p.isr.join(","),
        "data-replicas": p.replicas.join(","), "data-under-replicated": p.under_replicated,
        "data-offline": p.offline, "data-high-watermark": p.high_watermark });
      const sel = state.selected;
      if (sel && sel.topic === t.topic && sel.partition === p.partition) tr.classList.add("selected");
      tr.append(el("td", {}, t.topic), el("td", {}, p.partition), el("td", {}, p.leader),
        el("td", {}, p.leader_epoch), el("td", {}, p.replicas.join(", ")),
        el("td", {}, p.isr.join(", ")),
        el("td", { class: "hw", title: "the leader's high watermark, as last read" },
          p.high_watermark ?? "?"),
        el("td", { class: "state" }, health));
      tr.onclick = () => select(t.topic, p.partition);
      body.append(tr);
    }
  }
}

// -- consumer groups -------------------------------------------------------------------------------
function renderGroups(groups) {
  const body = document.querySelector("#groups-table tbody");
  body.replaceChildren();
  if (!groups.length) {
    body.append(el("tr", {}, ""));
    body.firstChild.append(el("td", { colspan: 8, class: "muted" }, "no consumer groups"));
    return;
  }
  for (const g of groups) {
    const members = g.members.map((m) => `${m.client_id} (${Object.entries(m.assignment)
      .map(([t, ps]) => `${t}: ${ps.join(",")}`).join("; ") || "nothing assigned"})`).join(", ");
    const offsets = g.offsets.length ? g.offsets : [null];
    offsets.forEach((o, i) => {
      const tr = el("tr", { class: "group-offset", "data-group": g.group, "data-state": g.state,
        "data-members": g.members.length, "data-topic": o && o.topic, "data-partition": o && o.partition,
        "data-committed": o && o.committed_offset, "data-high-watermark": o && o.high_watermark,
        "data-lag": o && o.lag });
      if (i === 0) {
        const span = { rowspan: offsets.length };
        tr.append(el("td", span, g.group), el("td", span, g.state),
          el("td", span, g.coordinator), el("td", span, `${g.members.length}${members ? ": " + members : ""}`));
      }
      tr.append(el("td", {}, o ? `${o.topic}-${o.partition}` : "—"),
        el("td", {}, o ? o.committed_offset : ""), el("td", {}, o ? o.high_watermark ?? "?" : ""),
        el("td", { class: "lag" }, o ? o.lag ?? "?" : ""));
      body.append(tr);
    });
  }
}

// -- the simulator's scenarios, replayed in the same drawing ---------------------------------------
const sim = { data: null, index: 0 };

function renderSim() {
  const data = sim.data;
  if (!data || !data.steps.length) return;
  sim.index = Math.max(0, Math.min(sim.index, data.steps.length - 1));
  if (sim.inUrl) writeUrl();
  const step = data.steps[sim.index];
  const stepBox = document.getElementById("sim-step");
  stepBox.textContent = `step ${sim.index + 1} / ${data.steps.length}`;
  stepBox.dataset.index = String(sim.index);
  stepBox.dataset.scenario = data.scenario;
  stepBox.dataset.truncation = data.truncation;
  document.getElementById("sim-event").textContent = step.event;
  document.getElementById("sim-notes").replaceChildren(...step.notes.map((n) => el("li", {}, n)));
  renderPartition(step.partition, step.brokers, SIM, step.values);
  const verdict = document.getElementById("sim-verdict");
  verdict.textContent = data.verdict;
  verdict.dataset.asExpected = String(data.as_expected);
}

async function loadScenario() {
  const name = document.getElementById("sim-scenario").value;
  const mode = document.getElementById("sim-truncation").value;
  const resp = await fetch(`/api/scenarios/${encodeURIComponent(name)}?truncation=${encodeURIComponent(mode)}`);
  if (!resp.ok) return;
  const data = await resp.json();
  // a later choice may have been answered first: keep only the answer to what is selected now
  if (name !== document.getElementById("sim-scenario").value
      || mode !== document.getElementById("sim-truncation").value) return;
  let keep = sim.data && sim.data.scenario === name ? sim.index : 0;  // same step, other mode
  if (sim.startStep !== undefined) { keep = sim.startStep; delete sim.startStep; }
  sim.data = data;
  sim.index = keep;
  state.simKey = null;
  const desc = (sim.list || []).find((s) => s.name === name);
  document.getElementById("sim-description").textContent = desc ? desc.description : "";
  renderSim();
}

async function initScenarios() {
  const resp = await fetch("/api/scenarios");
  if (!resp.ok) return;
  const list = await resp.json();
  sim.list = list.scenarios;
  const pick = document.getElementById("sim-scenario");
  pick.replaceChildren(...list.scenarios.map((s) => el("option", { value: s.name }, s.name)));
  const modes = document.getElementById("sim-truncation");
  modes.replaceChildren(...list.truncation_modes.map((m) => el("option", { value: m }, m)));
  modes.value = list.default_truncation;
  // ?scenario=NAME&truncation=MODE&step=N (1-based) opens that step of that replay
  const q = new URLSearchParams(location.search);
  if (list.scenarios.some((x) => x.name === q.get("scenario"))) {
    pick.value = q.get("scenario");
    if (list.truncation_modes.includes(q.get("truncation"))) modes.value = q.get("truncation");
    sim.startStep = Math.max(0, Number(q.get("step") || 1) - 1) || 0;
    sim.inUrl = true;
  }
  pick.onchange = modes.onchange = () => { sim.inUrl = true; loadScenario(); };
  const go = (f) => () => {
    if (sim.data) { sim.inUrl = true; sim.index = f(sim.index, sim.data.steps.length); renderSim(); }
  };
  document.getElementById("sim-first").onclick = go(() => 0);
  document.getElementById("sim-prev").onclick = go((i) => i - 1);
  document.getElementById("sim-next").onclick = go((i) => i + 1);
  document.getElementById("sim-last").onclick = go((_i, n) => n - 1);
  await loadScenario();
}

// -- the message browser ------------------------------------------------------------------------
const browser = { answer: null, seq: 0 };

function browserForm() {
  const time = document.getElementById("msg-time").value;
  return {
    from: document.getElementById("msg-from").value,
    offset: document.getElementById("msg-offset").value.trim(),
    ts: time ? new Date(time).getTime() : null,
    key: document.getElementById("msg-key").value,
    format: document.getElementById("msg-format").value,
    limit: document.getElementById("msg-limit").value.trim(),
  };
}

function localInput(ms) {  // a datetime-local value, in the browser's time zone
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 19);
}

function initBrowser() {
  const q = new URLSearchParams(location.search);
  const from = q.get("from");
  if (from === "offset" || from === "timestamp") document.getElementById("msg-from").value = from;
  if (q.has("offset")) document.getElementById("msg-offset").value = q.get("offset");
  if (q.has("ts") && !Number.isNaN(Number(q.get("ts")))) {
    document.getElementById("msg-time").value = localInput(Number(q.get("ts")));
  }
  if (q.has("key")) document.getElementById("msg-key").value = q.get("key");
  if (["text", "json", "hex"].includes(q.get("format"))) {
    document.getElementById("msg-format").value = q.get("format");
  }
  if (q.has("limit")) document.getElementById("msg-limit").value = q.get("limit");
  document.getElementById("msg-form").onsubmit = (event) => {
    event.preventDefault();
    writeUrl();
    loadMessages();
  };
  document.getElementById("msg-format").onchange = () => { writeUrl(); renderMessages(); };
  document.getElementById("msg-more").onclick = () => {
    if (!browser.answer) return;
    document.getElementById("msg-from").value = "offset";
    document.getElementById("msg-offset").value = String(browser.answer.next_offset);
    writeUrl();
    loadMessages();
  };
}

async function loadMessages() {
  const sel = state.selected;
  const status = document.getElementById("msg-status");
  if (!sel) return;
  const b = browserForm();
  const q = new URLSearchParams({ topic: sel.topic, partition: String(sel.partition) });
  if (b.from === "offset" && b.offset !== "") q.set("offset", b.offset);
  if (b.from === "timestamp" && b.ts !== null && !Number.isNaN(b.ts)) q.set("timestamp_ms", String(b.ts));
  if (b.limit) q.set("limit", b.limit);
  if (b.key) q.set("key", b.key);
  const seq = ++browser.seq;
  status.textContent = `reading ${keyOf(sel)}…`;
  delete status.dataset.error;
  let answer;
  try {
    const resp = await fetch(`/api/messages?${q}`);
    answer = await resp.json();
  } catch (exc) {
    answer = { error: String(exc) };
  }
  if (seq !== browser.seq) return;  // a later request was made: show its answer only
  browser.answer = answer.error ? null : answer;
  if (answer.error) {
    status.dataset.error = "true";
    status.textContent = `cannot read ${keyOf(sel)}: ${answer.error}`;
    document.querySelector("#msg-table tbody").replaceChildren();
    document.getElementById("msg-more").disabled = true;
    return;
  }
  renderMessages();
}

function bytesOf(b64) {
  if (b64 === null || b64 === undefined) return null;
  const raw = atob(b64);
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}

function rendered(b64, format) {
  const bytes = bytesOf(b64);
  if (bytes === null) return null;
  if (format === "hex") return Array.from(bytes, (x) => x.toString(16).padStart(2, "0")).join(" ");
  const text = new TextDecoder("utf-8").decode(bytes);
  if (format === "json") {
    try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return `(not JSON) ${text}`; }
  }
  return text;
}

function bytesCell(b64, format, cls) {
  const text = rendered(b64, format);
  return text === null ? el("td", { class: `bytes ${cls} null` }, "null")
                       : el("td", { class: `bytes ${cls}` }, text);
}

function renderMessages() {
  const a = browser.answer;
  const body = document.querySelector("#msg-table tbody");
  const status = document.getElementById("msg-status");
  const format = document.getElementById("msg-format").value;
  document.getElementById("msg-more").disabled = !a || a.next_offset >= a.high_watermark;
  if (!a) return;
  document.getElementById("msg-partition").textContent = `${a.topic}-${a.partition}`;
  body.replaceChildren(...a.records.map((r) => {
    const tr = el("tr", { class: "message", "data-offset": r.offset, "data-timestamp-ms": r.timestamp_ms,
      "data-key": rendered(r.key, "text") ?? "", "data-value": rendered(r.value, "text") ?? "" });
    const headers = r.headers.map(([k, v]) => `${k}: ${rendered(v, format) ?? "null"}`).join("\n");
    tr.append(el("td", {}, r.offset), el("td", {}, new Date(r.timestamp_ms).toISOString()),
      bytesCell(r.key, format, "key"), bytesCell(r.value, format, "value"),
      el("td", { class: "bytes headers" }, headers));
    return tr;
  }));
  Object.assign(status.dataset, { start: a.start_offset, next: a.next_offset,
    hw: a.high_watermark, count: a.records.length, scanned: a.scanned,
    complete: String(a.scan_complete), format });
  const range = a.records.length
    ? `offsets ${a.records[0].offset}–${a.records[a.records.length - 1].offset}` : "no records";
  let text = `${range} shown; the log holds ${a.log_start_offset}–${a.high_watermark - 1}` +
    ` (high watermark ${a.high_watermark})`;
  if (a.key) {
    text = `key contains "${a.key}": ${a.records.length} found in ${a.scanned} records read ` +
      `from offset ${a.start_offset}. A bounded scan, not an index: at most ` +
      `${a.scan_max_records} records per search` + (a.scan_complete
        ? ", up to the high watermark."
        : `; stopped before offset ${a.next_offset} ("next page" goes on).`);
  }
  status.textContent = text;
}

// -- changes: only with --allow-changes, each behind a confirmation ---------------------------------
function changesAllowed() { return Boolean(state.snapshot && state.snapshot.allow_changes); }

const confirmBox = { resolve: null };

// Shows the confirmation panel; resolves true on "confirm", false on "cancel" (or another ask).
// typed: the text the user must type before "confirm" is enabled (a topic to delete).
function askConfirm(text, detail, typed = null) {
  if (confirmBox.resolve) confirmBox.resolve(false);
  const box = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-detail").replaceChildren(...(detail ? [detail] : []));
  const typeLabel = document.getElementById("confirm-type");
  const input = document.getElementById("confirm-input");
  const yes = document.getElementById("confirm-yes");
  typeLabel.hidden = typed === null;
  input.value = "";
  document.getElementById("confirm-expect").textContent = typed ?? "";
  yes.disabled = typed !== null;
  input.oninput = () => { yes.disabled = typed !== null && input.value !== typed; };
  box.hidden = false;
  box.dataset.text = text;
  return new Promise((resolve) => {
    confirmBox.resolve = resolve;
    const done = (answer) => {
      box.hidden = true;
      confirmBox.resolve = null;
      resolve(answer);
    };
    yes.onclick = () => done(true);
    document.getElementById("confirm-no").onclick = () => done(false);
  });
}

async function postChange(path, body) {
  const status = document.getElementById("change-status");
  status.textContent = "…";
  delete status.dataset.ok;
  let answer;
  try {
    const resp = await fetch(path, { method: "POST", headers: { "Content-Type": "application/json" },
                                     body: JSON.stringify(body) });
    answer = await resp.json();
  } catch (exc) {
    answer = { ok: false, error: String(exc) };
  }
  status.dataset.ok = String(Boolean(answer.ok));
  status.textContent = answer.ok ? (answer.message || "done") : `refused: ${answer.error}`;
  return answer;
}

function parseConfigs(text) {
  const out = {};
  for (const item of text.split(",").map((x) => x.trim()).filter(Boolean)) {
    const at = item.indexOf("=");
    if (at <= 0) throw new Error(`${item}: not name=value`);
    out[item.slice(0, at).trim()] = item.slice(at + 1).trim();
  }
  return out;
}

function initChanges() {
  document.getElementById("create-topic").onsubmit = async (event) => {
    event.preventDefault();
    const name = document.getElementById("create-name").value.trim();
    const partitions = Number(document.getElementById("create-partitions").value);
    const rf = Number(document.getElementById("create-rf").value);
    let configs;
    try {
      configs = parseConfigs(document.getElementById("create-configs").value);
    } catch (exc) {
      const status = document.getElementById("change-status");
      status.dataset.ok = "false";
      status.textContent = `configs: ${exc.message}`;
      return;
    }
    const summary = `${partitions} partition(s), replication factor ` +
      (rf === -1 ? "the cluster's default" : rf) +
      (Object.keys(configs).length ? `, ${Object.entries(configs).map(([k, v]) => `${k}=${v}`).join(", ")}` : "");
    if (!await askConfirm(`create topic ${name}?`, el("div", {}, summary))) return;
    const answer = await postChange("/api/topics/create",
      { topic: name, partitions, replication_factor: rf, configs });
    if (answer.ok) document.getElementById("create-name").value = "";
  };
  document.getElementById("reset-mode").onchange = resetModeInputs;
  resetModeInputs();
  document.getElementById("reset-offsets").onsubmit = async (event) => {
    event.preventDefault();
    const body = resetBody();
    const plan = await postChange("/api/groups/reset-offsets", { ...body, execute: false });
    if (!plan.ok) return;
    const table = el("table", { id: "reset-plan" });
    table.append(el("tr", {}), ...plan.plan.map((r) => {
      const tr = el("tr", { class: "planned", "data-topic": r.topic, "data-partition": r.partition,
        "data-new-offset": r.new_offset });
      tr.append(el("td", {}, r.topic), el("td", {}, r.partition), el("td", {}, r.new_offset));
      return tr;
    }));
    table.firstChild.append(el("th", {}, "topic"), el("th", {}, "partition"), el("th", {}, "new offset"));
    document.getElementById("change-status").textContent =
      `the plan for group ${body.group}: ${plan.plan.length} partition(s)`;
    if (!plan.plan.length) return;
    if (!await askConfirm(`reset group ${body.group}'s committed offsets?`, table)) return;
    const done = await postChange("/api/groups/reset-offsets", { ...body, execute: true });
    if (done.ok) {
      document.getElementById("change-status").textContent =
        `group ${body.group}: ${done.plan.length} committed offset(s) reset`;
    }
  };
}

function resetModeInputs() {
  const mode = document.getElementById("reset-mode").value;
  document.getElementById("reset-offset").hidden = mode !== "offset";
  document.getElementById("reset-time").hidden = mode !== "datetime";
}

function resetBody() {
  const mode = document.getElementById("reset-mode").value;
  const topic = document.getElementById("reset-topic").value;
  const body = { group: document.getElementById("reset-group").value, mode,
                 topic: topic === "" ? null : topic };
  if (mode === "offset") body.offset = Number(document.getElementById("reset-offset").value);
  if (mode === "datetime") body.timestamp_ms = new Date(document.getElementById("reset-time").value).getTime();
  return body;
}

async function deleteTopic(topic) {
  if (!await askConfirm(`delete topic ${topic} and every record in it?`,
    el("div", {}, "This cannot be undone."), topic)) return;
  await postChange("/api/topics/delete", { topic });
}

function fillSelect(sel, options) {  // [value, label] pairs; keeps the choice if still offered
  const keys = JSON.stringify(options);  // labels too: a group's state changes
  if (sel.dataset.keys === keys) return;
  const keep = sel.value;
  sel.dataset.keys = keys;
  sel.replaceChildren(...options.map(([v, label]) => el("option", { value: v }, label)));
  if (options.some(([v]) => v === keep)) sel.value = keep;
}

function renderChangeForms(snap) {
  const allowed = changesAllowed();
  document.body.dataset.allowChanges = String(allowed);
  document.getElementById("create-topic").hidden = !allowed;
  const reset = document.getElementById("reset-offsets");
  reset.hidden = !allowed || !(snap.groups || []).length;
  if (!allowed) return;
  fillSelect(document.getElementById("reset-group"),
    (snap.groups || []).map((g) => [g.group, `group ${g.group} (${g.state})`]));
  fillSelect(document.getElementById("reset-topic"), [["", "every topic it has offsets for"],
    ...(snap.topics || []).filter((t) => !t.internal).map((t) => [t.topic, `topic ${t.topic}`])]);
}

// -- throughput and size per topic ---------------------------------------------------------------
function human(bytes) {
  if (bytes === null || bytes === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = bytes, i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
  return i === 0 ? `${bytes} B` : `${v.toFixed(1)} ${units[i]}`;
}

function rate(value, bytes = false) {
  if (value === null || value === undefined) return "—";
  return bytes ? `${human(value)}/s` : `${value}/s`;
}

function renderTopicStats(topics) {
  const body = document.querySelector("#topic-stats-table tbody");
  const allowed = changesAllowed();
  body.replaceChildren(...[...topics.filter((t) => !t.internal), ...topics.filter((t) => t.internal)]
    .map((t) => {
      const tr = el("tr", { class: "topic-stats", "data-topic": t.topic,
        "data-partitions": t.partitions.length, "data-size-bytes": t.size_bytes,
        "data-size-on-disk-bytes": t.size_on_disk_bytes, "data-records-in-per-s": t.records_in_per_s,
        "data-records-out-per-s": t.records_out_per_s, "data-bytes-in-per-s": t.bytes_in_per_s,
        "data-bytes-out-per-s": t.bytes_out_per_s });
      const actions = el("td", { class: "actions" });
      const cfg = el("button", { class: "configs-link", type: "button", "data-configs-topic": t.topic },
        "configs");
      cfg.onclick = () => openConfigs("topic", t.topic);
      actions.append(cfg);
      if (allowed && !t.internal) {
        const del = el("button", { class: "change delete-topic", type: "button", "data-topic": t.topic },
          "delete…");
        del.onclick = () => deleteTopic(t.topic);
        actions.append(" ", del);
      }
      tr.append(el("td", {}, t.topic), el("td", {}, t.partitions.length),
        el("td", {}, human(t.size_bytes)), el("td", {}, human(t.size_on_disk_bytes)),
        el("td", {}, rate(t.records_in_per_s)), el("td", {}, rate(t.records_out_per_s)),
        el("td", {}, rate(t.bytes_in_per_s, true)), el("td", {}, rate(t.bytes_out_per_s, true)),
        actions);
      return tr;
    }));
}

// -- configs of a topic or a broker, with their sources (?configs=topic:T | broker:N) -------------
const configsView = { kind: null, name: null, seq: 0 };

function openConfigs(kind, name) {
  configsView.kind = kind;
  configsView.name = name;
  writeUrl();
  loadConfigs();
  document.getElementById("configs-section").scrollIntoView({ block: "nearest" });
}

async function loadConfigs() {
  const section = document.getElementById("configs-section");
  const status = document.getElementById("configs-status");
  const body = document.querySelector("#configs-table tbody");
  if (!configsView.kind) { section.hidden = true; return; }
  section.hidden = false;
  const { kind, name } = configsView;
  document.getElementById("configs-title").textContent = `${kind} ${name}`;
  Object.assign(section.dataset, { kind, name, loaded: "false" });
  status.textContent = "reading…";
  delete status.dataset.error;
  const seq = ++configsView.seq;
  let answer;
  try {
    const resp = await fetch(`/api/configs?${new URLSearchParams({ type: kind, name })}`);
    answer = await resp.json();
  } catch (exc) {
    answer = { error: String(exc) };
  }
  if (seq !== configsView.seq) return;
  section.dataset.loaded = "true";
  if (answer.error) {
    status.dataset.error = "true";
    status.textContent = `cannot read the configs of ${kind} ${name}: ${answer.error}`;
    body.replaceChildren();
    return;
  }
  const overridden = answer.configs.filter((c) => c.source.startsWith("DYNAMIC")).length;
  status.textContent = `${answer.configs.length} configs, ${overridden} set dynamically` +
    " (the source says which layer each value comes from; sensitive values are never shown)";
  body.replaceChildren(...answer.configs.map((c) => {
    const tr = el("tr", { class: "config", "data-name": c.name, "data-value": c.value ?? "",
      "data-source": c.source, "data-sensitive": String(c.sensitive), "data-read-only": String(c.read_only) });
    tr.append(el("td", {}, c.name),
      el("td", { class: "value" }, c.sensitive ? "(sensitive: hidden)" : c.value ?? "null"),
      el("td", { class: "source" }, c.source),
      el("td", { class: "synonyms" }, c.synonyms.map((s) =>
        `${s.source}: ${s.name}=${c.sensitive ? "(hidden)" : s.value ?? "null"}`).join(" · ")));
    return tr;
  }));
}

function initConfigs() {
  const q = new URLSearchParams(location.search);
  const spec = q.get("configs");
  if (spec && /^(topic|broker):./.test(spec)) {
    const at = spec.indexOf(":");
    configsView.kind = spec.slice(0, at);
    configsView.name = spec.slice(at + 1);
    loadConfigs();
  }
  document.getElementById("configs-close").onclick = () => {
    configsView.kind = configsView.name = null;
    writeUrl();
    loadConfigs();
  };
}

// -- the whole page ------------------------------------------------------------------------------------
function render(snap) {
  state.snapshot = snap;
  const err = document.getElementById("error");
  err.hidden = !snap.error;
  err.textContent = snap.error ? `cannot read the cluster: ${snap.error}` : "";
  renderCluster(snap.cluster);
  const partitions = ordered(snap.partitions || []);
  if (!state.selected) {
    const first = defaultPartition(snap);
    if (first) select(first.topic, first.partition, false);
  }
  renderSelect(snap.topics || []);
  const p = state.selected && partitions.find((q) =>
    q.topic === state.selected.topic && q.partition === state.selected.partition);
  const view = document.getElementById("partition-view");
  view.dataset.found = String(Boolean(p));
  if (p) renderPartition(p, (snap.cluster && snap.cluster.brokers) || []);
  // "updated": when what is drawn last changed (the partition shown, else the cluster), not
  // when the server last asked (it sends nothing while nothing changes).
  const shownNow = JSON.stringify(p || null);
  if (shownNow !== state.shownJson || !state.changedMs) {
    state.shownJson = shownNow;
    state.changedMs = snap.time_ms || Date.now();
  }
  const updated = document.getElementById("updated");
  updated.dataset.changedMs = String(state.changedMs);
  updated.textContent = `${p ? keyOf(p) : "cluster"} last changed ` +
    new Date(state.changedMs).toLocaleTimeString();
  renderTopicStats(snap.topics || []);
  renderTopics(snap.topics || []);
  renderGroups(snap.groups || []);
  renderChangeForms(snap);
  state.renders += 1;
  document.body.dataset.renders = String(state.renders);
  document.body.dataset.snapshotTime = String(snap.time_ms || "");
}

function connect() {
  const status = document.getElementById("conn-status");
  if (state.events) state.events.close();
  const sel = state.selected;
  const source = new EventSource(sel ? `/api/events?topic=${encodeURIComponent(sel.topic)}` +
                                       `&partition=${sel.partition}` : "/api/events");
  state.events = source;
  source.addEventListener("snapshot", (event) => render(JSON.parse(event.data)));
  source.onopen = () => { status.dataset.state = "live"; status.textContent = "live"; };
  source.onerror = () => { status.dataset.state = "stale"; status.textContent = "reconnecting…"; };
}

window.floodmarkState = state;
state.selected = readSelection();
initBrowser();
initConfigs();
initChanges();
connect();
if (state.selected) loadMessages();
initScenarios();
