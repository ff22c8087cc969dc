// The mnemo explorer: a client of the service's /v1 routes, nothing more.
//
// Every request carries the key the user typed in (kept in this tab's sessionStorage),
// so the page sees exactly what the API lets that key see. Stored text is untrusted:
// it only ever reaches the page as Text nodes (el() and append() below) or attribute
// values, never as markup; there is no innerHTML, outerHTML or insertAdjacentHTML here.
"use strict";

(() => {
  // Mirrors of mnemo.model (tests/test_explorer.py checks they match).
  const KINDS = ["semantic", "procedural", "episodic"];
  const CATEGORIES = ["fact", "profile", "preference", "decision", "change", "failure", "lesson", "event",
    "deadline", "instruction", "routine", "note"];
  const STATUSES = ["active", "superseded", "forgotten", "decayed"];
  const KEY = "mnemo-explorer.key";
  const USER = "mnemo-explorer.user";
  const LIST_LIMIT = 10000;
  const MAX_FIGURES = 24;
  // The API lives next to the page: /explorer -> /v1/..., also behind a path prefix.
  const BASE = location.pathname.replace(/\/explorer\/?$/, "");

  const state = { memories: [], salience: {}, byId: new Map(), figureUrls: [] };
  const $ = (selector) => document.querySelector(selector);

  // ------------------------------------------------------------------ DOM, safely
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "class") node.className = value;
      else if (name === "on") for (const [type, fn] of Object.entries(value)) node.addEventListener(type, fn);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    return append(node, children);
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      // A string becomes a Text node: whatever it holds is shown, never parsed.
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function fill(node, ...children) {
    node.replaceChildren();
    return append(node, children);
  }

  function say(text, kind = "info") {
    const status = $("#status");
    status.className = kind;
    status.textContent = text;
  }

  const num = (x, digits = 3) => (typeof x === "number" && Number.isFinite(x)
    ? (Number.isInteger(x) ? String(x) : x.toFixed(digits)) : x === null || x === undefined ? "" : String(x));
  const when = (iso) => (iso ? String(iso).replace("T", " ").replace(/(\.\d+)?(Z|[+-]00:?00)$/, " UTC") : "");
  const badge = (text, cls) => el("span", { class: `badge ${cls || text}` }, text);
  const json = (value) => el("pre", { class: "json" }, JSON.stringify(value, null, 1));
  const storyLink = (id, label) => el("a", { href: `#story/${encodeURIComponent(id)}`, class: "id" }, label || id);
  const meter = (x) => el("span", { class: "meter" }, el("meter", { min: 0, max: 1, value: x }), num(x, 2));
  const table = (head, rows, cls = "data") => el("table", { class: cls },
    el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows));
  const section = (title, ...body) => el("section", { class: "panel" }, el("h2", {}, title), body);
  const scores = (s) => el("span", { class: "scores" },
    Object.entries(s || {}).map(([k, v]) => el("span", {}, `${k} ${num(v)}`)));

  // ------------------------------------------------------------------ the API
  const key = () => sessionStorage.getItem(KEY);
  const user = () => $("#user").value.trim();

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function api(method, path, body) {
    const headers = { Authorization: `Bearer ${key()}`, Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const res = await fetch(BASE + path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer",
    });
    if (res.ok) return res;
    let detail = res.statusText;
    try {
      const problem = await res.json();
      detail = Array.isArray(problem.detail)
        ? problem.detail.map((p) => `${(p.loc || []).join(".")}: ${p.msg}`).join("; ") : problem.detail;
    } catch (_) { /* not JSON: keep the status text */ }
    if (res.status === 401) {
      const message = `The server refused the key (${detail}); give the key of a store.`;
      closeStore(message);
      throw new ApiError(401, message);
    }
    throw new ApiError(res.status, `${res.status}: ${detail}`);
  }

  const getJson = async (path) => (await api("GET", path)).json();
  const postJson = async (path, body) => (await api("POST", path, body)).json();
  const query = (params) => new URLSearchParams(Object.entries(params).filter(([, v]) => v !== "" && v != null));

  async function run(label, work) {
    say(`${label}…`, "busy");
    try {
      await work();
      say("");
    } catch (err) {
      say(err instanceof ApiError ? err.message : `${label} failed: ${err}`, "error");
    }
  }

  // ------------------------------------------------------------------ memories
  async function loadMemories() {
    const form = $("#memory-filters");
    const params = query({ include_inactive: true, limit: LIST_LIMIT, user: user(),
      kind: form.kind.value, category: form.category.value });
    const body = await getJson(`/v1/memories?${params}`);
    state.memories = body.memories;
    state.salience = body.salience || {};
    state.salienceAt = body.salience_at;
    for (const m of body.memories) state.byId.set(m.id, m);
    if (!user()) {
      const users = [...new Set(body.memories.map((m) => m.user))].sort();
      fill($("#users"), users.map((u) => el("option", { value: u })));
    }
    renderMemories();
  }

  function renderMemories() {
    const form = $("#memory-filters");
    const shown = new Set([...form.querySelectorAll("input[name=status]:checked")].map((i) => i.value));
    const needle = form.q.value.trim().toLowerCase();
    for (const s of STATUSES) {
      form.querySelector(`[data-count=${s}]`).textContent =
        `(${state.memories.filter((m) => m.status === s).length})`;
    }
    const rows = state.memories.filter((m) => shown.has(m.status) && (!needle || m.text.toLowerCase().includes(needle)));
    const limited = state.memories.length >= LIST_LIMIT ? ` — the first ${LIST_LIMIT} only` : "";
    $("#memory-summary").textContent = `${rows.length} of ${state.memories.length} memories` +
      `${user() ? ` of user ${user()}` : " of all users"}${limited}; salience at ${when(state.salienceAt)}`;
    fill($("#memory-table tbody"), rows.map(memoryRow));
  }

  function memoryRow(m) {
    const tombstone = m.status !== "active" ? el("div", { class: "tombstone" },
      el("b", {}, `${m.status} `), when(m.status_at), m.status_reason ? `: ${m.status_reason}` : "",
      m.successor_id ? [" → replaced by ", storyLink(m.successor_id)] : "") : null;
    const record = m.subject || m.record_id || (m.meta && m.meta.record) || "?";
    const slot = m.attribute ? `${record}.${m.attribute} = ${m.value ?? ""}` : "";
    return el("tr", { class: `status-${m.status}`, "data-id": m.id },
      el("td", {}, badge(m.status), m.pinned ? badge("pinned") : null),
      el("td", { class: "memory" }, el("div", { class: "text" }, m.text), tombstone,
        el("div", { class: "meta" }, storyLink(m.id, `story of ${m.id}`))),
      el("td", {}, `${m.kind} · ${m.category}`, slot ? el("div", { class: "slot" }, slot) : null),
      el("td", {}, meter(m.importance)),
      el("td", {}, state.salience[m.id] === undefined ? "" : meter(state.salience[m.id])),
      el("td", { class: "provenance" }, provenance(m)));
  }

  function provenance(m) {
    const extractor = m.meta && (m.meta.extractor || m.meta.rule)
      ? `${m.meta.extractor || ""}${m.meta.rule ? ` (${m.meta.rule})` : ""}` : null;
    return [
      el("div", {}, `source: ${m.source}`, m.user ? ` · user ${m.user}` : ""),
      m.session || m.agent ? el("div", {}, [m.session && `session ${m.session}`, m.agent && `agent ${m.agent}`]
        .filter(Boolean).join(" · ")) : null,
      el("div", {}, `created ${when(m.created_at)}`),
      m.turn_id ? el("div", { class: "id" }, `turn ${m.turn_id}`) : null,
      extractor ? el("div", {}, `by ${extractor}`) : null,
      m.corroborations || m.access_count
        ? el("div", {}, `corroborated ${m.corroborations}× · recalled ${m.access_count}×`) : null,
    ];
  }

  // ------------------------------------------------------------------ one memory's story
  async function fetchMemory(id) {
    if (!state.byId.has(id)) state.byId.set(id, await getJson(`/v1/memories/${encodeURIComponent(id)}`));
    return state.byId.get(id);
  }

  async function loadStory(id) {
    $("#story-form").memory.value = id;
    const path = `/v1/memories/${encodeURIComponent(id)}`;
    const [m, story] = await Promise.all([getJson(path), getJson(`${path}/history`)]);
    state.byId.set(m.id, m);
    const parts = [memoryCard(m)];
    if (m.status !== "active") parts.push(await tombstonePanel(m, story.events));
    parts.push(await linksPanel(m, story.links));
    parts.push(historyPanel(m, story.events));
    fill($("#story"), parts);
  }

  function memoryCard(m) {
    const fields = ["id", "user", "kind", "category", "subject", "attribute", "value", "record_id", "importance",
      "pinned", "single_valued", "source", "session", "agent", "turn_id", "created_at", "valid_from",
      "last_accessed", "expires_at", "access_count", "corroborations"];
    const item = (name, value) => el("div", {}, el("dt", {}, name), el("dd", {}, value));
    const items = fields.filter((f) => m[f] !== null && m[f] !== undefined).map((f) =>
      item(f, /_at$|_from$|^last_accessed$/.test(f) ? when(m[f]) : num(m[f])));
    if (m.references && m.references.length) {
      items.push(item("references", m.references.map((r) => el("span", { class: "chip" }, r))));
    }
    if (state.salience[m.id] !== undefined) items.push(item("salience", meter(state.salience[m.id])));
    return section("Memory", el("p", { class: "big" }, badge(m.status), " ", el("span", { class: "text" }, m.text)),
      el("dl", { class: "grid" }, items),
      Object.keys(m.meta || {}).length ? el("details", {}, el("summary", {}, "meta"), json(m.meta)) : null);
  }

  async function tombstonePanel(m, events) {
    const ended = [...events].reverse().find((e) => e.memory_id === m.id && e.status_to === m.status);
    const body = [
      el("p", {}, badge(m.status), ` at ${when(m.status_at)}`),
      el("p", { class: "reason" }, el("b", {}, "reason: "), m.status_reason || (ended && ended.reason) || "—"),
    ];
    if (ended && Object.keys(ended.evidence || {}).length) {
      body.push(el("h3", {}, "evidence"), evidenceTable(ended.evidence));
    }
    if (m.successor_id) {
      const next = await fetchMemory(m.successor_id);
      const nextStory = await getJson(`/v1/memories/${encodeURIComponent(next.id)}/history`);
      const causes = nextStory.links.filter((l) => l.kind === "because" && l.src === next.id);
      body.push(el("h3", {}, "replaced by"),
        el("p", { class: "successor" }, badge(next.status), " ", el("span", { class: "text" }, next.text), " ",
          storyLink(next.id)));
      for (const link of causes) {
        const cause = await fetchMemory(link.dst);
        body.push(el("p", { class: "because" }, el("b", {}, "because: "), el("span", { class: "text" }, cause.text),
          " ", storyLink(cause.id)));
      }
    }
    return section(`Tombstone: ${m.status}`, body);
  }

  function evidenceTable(evidence) {
    return el("table", { class: "fields" }, el("tbody", {}, Object.entries(evidence).map(([k, v]) =>
      el("tr", {}, el("th", {}, k), el("td", {}, v !== null && typeof v === "object" ? json(v) : num(v))))));
  }

  async function linksPanel(m, links) {
    const phrase = {
      supersedes: [`supersedes`, `is superseded by`],
      because: [`was caused by (because)`, `is the cause (because) of`],
      refers_to: [`refers to`, `is referred to by`],
    };
    const rows = [];
    for (const link of links) {
      const outgoing = link.src === m.id;
      const other = outgoing ? link.dst : link.src;
      let text = "";
      try {
        text = (await fetchMemory(other)).text;
      } catch (err) {
        text = err instanceof ApiError && err.status === 404 ? "(not in this store)" : String(err);
      }
      rows.push(el("tr", { class: `link-${link.kind}` }, el("td", {}, badge(link.kind, "link")),
        el("td", {}, `this ${phrase[link.kind] ? phrase[link.kind][outgoing ? 0 : 1] : link.kind}`),
        el("td", {}, el("span", { class: "text" }, text), " ", storyLink(other)), el("td", {}, when(link.at))));
    }
    return section("Links", rows.length ? table(["kind", "", "memory", "at"], rows)
      : el("p", { class: "empty" }, "No supersedes, because or refers_to links."));
  }

  function historyPanel(m, events) {
    const rows = events.map((e) => el("tr", {},
      el("td", {}, when(e.at)),
      el("td", {}, badge(e.action, "action"), e.memory_id !== m.id ? [" of ", storyLink(e.memory_id)] : null),
      el("td", {}, e.status_from || e.status_to ? `${e.status_from || "·"} → ${e.status_to || "·"}` : ""),
      el("td", {}, e.reason || ""),
      el("td", {}, e.other_id && e.other_id !== m.id ? storyLink(e.other_id) : ""),
      el("td", {}, Object.keys(e.evidence || {}).length
        ? el("details", {}, el("summary", {}, "evidence"), json(e.evidence)) : "")));
    return section("History", table(["at", "action", "status", "reason", "other", "evidence"], rows));
  }

  // ------------------------------------------------------------------ recall
  async function loadRecall() {
    const form = $("#recall-form");
    if (!user()) throw new Error("choose a user first (the field at the top)");
    const body = { query: form.query.value, user: user() };
    if (form.budget.value !== "") body.budget_tokens = Number(form.budget.value);
    const r = await postJson("/v1/recall", body);
    const cited = new Map(r.citations.map((c) => [c.memory_id, c]));
    const packed = r.memories.map((p, i) => el("tr", {},
      el("td", {}, String(i + 1)), el("td", {}, num(p.score)), el("td", {}, String(p.tokens)),
      el("td", { class: "memory" }, el("div", { class: "text" }, p.memory.text),
        p.note ? el("div", { class: "note" }, p.note) : null, storyLink(p.memory.id)),
      el("td", {}, `${p.memory.kind} · ${p.memory.category}`),
      el("td", {}, scores(p.scores))));
    const citations = r.citations.map((c) => el("tr", {}, el("td", {}, storyLink(c.memory_id)),
      el("td", {}, c.source), el("td", {}, c.session || ""), el("td", { class: "id" }, c.turn_id || ""),
      el("td", {}, when(c.at))));
    const counts = {};
    for (const t of r.trace) counts[t.reason] = (counts[t.reason] || 0) + 1;
    const onlyExcluded = el("input", { type: "checkbox", id: "excluded-only" });
    const traceBody = el("tbody", {});
    const drawTrace = () => fill(traceBody, r.trace.filter((t) => !onlyExcluded.checked || !t.included).map((t) =>
      el("tr", { class: t.included ? "included" : "excluded" },
        el("td", { class: "nowrap" }, t.included ? "✓ in" : "✗ out"), el("td", {}, badge(t.reason, "reason")),
        el("td", { class: "memory" }, el("div", { class: "text" }, t.text), storyLink(t.memory_id),
          cited.has(t.memory_id) ? " · cited" : ""),
        el("td", {}, t.detail || ""), el("td", {}, scores(t.scores)))));
    onlyExcluded.addEventListener("change", drawTrace);
    drawTrace();
    const prov = r.provenance || {};
    fill($("#recall"),
      section("Pack",
        el("p", { class: "big" }, "confidence ", badge(r.confidence, `confidence ${r.confidence}`),
          r.message ? ` — ${r.message}` : "", el("span", { class: "muted" },
            ` · ${r.tokens_used} of ${r.budget_tokens} tokens · embedder ${prov.embedder || "?"} · llm ` +
            `${(prov.llm && prov.llm.mode) || "?"} · recipe ${prov.recipe || "?"}`)),
        packed.length ? table(["#", "score", "tokens", "memory", "kind", "scores"], packed)
          : el("p", { class: "empty" }, "Nothing packed.")),
      r.history && r.history.length ? section("History reached by expansion (not current)",
        table(["memory", "note"], r.history.map((p) => el("tr", {},
          el("td", { class: "memory" }, el("div", { class: "text" }, p.memory.text), storyLink(p.memory.id)),
          el("td", {}, p.note || ""))))) : null,
      section("Citations", citations.length ? table(["memory", "source", "session", "turn", "at"], citations)
        : el("p", { class: "empty" }, "No citations.")),
      section("Trace: every candidate, and why it is in or out",
        el("p", {}, Object.entries(counts).map(([k, v]) => el("span", { class: "chip" }, `${k}: ${v}`)),
          el("label", { class: "inline" }, onlyExcluded, " only what was left out")),
        el("table", { class: "data", id: "trace" },
          el("thead", {}, el("tr", {}, ["", "reason", "memory", "detail", "scores"].map((h) => el("th", {}, h)))),
          traceBody)));
  }

  // ------------------------------------------------------------------ audit
  async function loadAudit() {
    if (!user()) throw new Error("choose a user first (the field at the top)");
    const a = await postJson("/v1/audit", { user: user() });
    const contradictions = a.contradictions.map((c) => {
      const rec = c.recommendation || {};
      return el("div", { class: "finding" },
        el("h3", {}, `${c.record} · ${c.attribute}: `, c.values.map((v) => el("span", { class: "chip" }, v))),
        table(["value", "memory", "source", "importance", "confirmed"], c.memories.map((m) =>
          el("tr", { class: m.id === rec.memory_id ? "recommended" : "" },
            el("td", {}, m.value ?? "", m.id === rec.memory_id ? badge("keep", "keep") : null),
            el("td", { class: "memory" }, el("div", { class: "text" }, m.text), storyLink(m.id)),
            el("td", {}, m.source), el("td", {}, num(m.importance)), el("td", {}, when(m.valid_from || m.created_at))))),
        el("p", { class: "recommendation" }, el("b", {}, "recommended: "),
          rec.memory_id ? `keep ${JSON.stringify(rec.value)}` : "no automatic choice",
          ` (rule: ${rec.rule}, confidence ${num(rec.confidence, 2)})`),
        el("p", { class: "rationale" }, el("b", {}, "rationale: "), rec.rationale || ""));
    });
    const absences = a.absences.map((x) => el("tr", {},
      el("td", { class: "memory" }, el("div", { class: "text" }, state.byId.has(x.memory_id)
        ? state.byId.get(x.memory_id).text : ""), storyLink(x.memory_id)),
      el("td", {}, el("span", { class: "chip" }, x.reference)), el("td", {}, x.rationale)));
    const semantic = a.semantic.map((s) => el("tr", {},
      el("td", {}, storyLink(s.a_id)), el("td", {}, storyLink(s.b_id)), el("td", {}, s.subject),
      el("td", {}, num(s.cosine)), el("td", {}, badge(s.verdict, "verdict")), el("td", {}, s.judge),
      el("td", {}, s.rationale, s.error ? ` (error: ${s.error})` : "")));
    const prov = a.provenance || {};
    fill($("#audit"),
      el("p", { class: "summary" }, `${a.contradictions.length} contradictions, ${a.absences.length} absences, ` +
        `${a.semantic.length} semantic findings for ${a.user} at ${when(a.at)} · judge ${prov.judge || "?"} · ` +
        `ladder ${(prov.ladder || []).join(" → ")}`),
      section("Contradictions", contradictions.length ? contradictions
        : el("p", { class: "empty" }, "No two active memories disagree on one attribute of one record.")),
      section("Absences: references nothing active holds", absences.length
        ? table(["memory", "reference", "rationale"], absences) : el("p", { class: "empty" }, "None.")),
      section("Opposite-meaning pairs", semantic.length
        ? table(["a", "b", "subject", "cosine", "verdict", "judge", "rationale"], semantic)
        : el("p", { class: "empty" }, "None.")));
  }

  // ------------------------------------------------------------------ experiments
  async function loadExperiments() {
    for (const url of state.figureUrls) URL.revokeObjectURL(url);
    state.figureUrls = [];
    let listing;
    try {
      listing = await getJson("/v1/experiments");
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) {
        fill($("#experiments"), el("p", { class: "empty" }, err.message));
        return;
      }
      throw err;
    }
    const groups = new Map();
    for (const run of listing.runs) {
      const group = run.folder.includes("/") ? run.folder.slice(0, run.folder.lastIndexOf("/")) : ".";
      if (!groups.has(group)) groups.set(group, []);
      groups.get(group).push(run);
    }
    const parts = [el("p", { class: "summary" },
      `${listing.runs.length} results files in ${listing.root}/, newest first`)];
    let budget = MAX_FIGURES;
    for (const [group, runs] of groups) {
      const all = [...new Set(runs.flatMap((r) => Object.keys(r.values)))]
        .sort((a, b) => (b.startsWith("param_") - a.startsWith("param_")) || a.localeCompare(b));
      // A sweep's table shows what differs between its runs; what every run shares is listed once, below.
      const varies = (n) => runs.length < 2 || new Set(runs.map((r) => JSON.stringify(r.values[n]))).size > 1;
      const names = all.filter(varies);
      const shared = all.filter((n) => !varies(n));
      const open = (path) => ({ click: (ev) => { ev.preventDefault(); openFile(path); } });
      const rows = runs.map((r) => el("tr", {},
        el("td", {}, el("a", { href: "#experiments", class: "id", title: `open ${r.path}`, on: open(r.path) },
          group === "." ? r.folder : r.folder.slice(group.length + 1))),
        el("td", { class: "nowrap" }, when(r.modified)),
        names.map((n) => el("td", { class: "num" }, num(r.values[n]))),
        el("td", { title: r.tables.join(", ") }, r.error ||
          (r.tables.length > 3 ? `${r.tables.slice(0, 3).join(", ")} +${r.tables.length - 3}` : r.tables.join(", ")))));
      const figures = runs.flatMap((r) => r.figures);
      const shown = figures.slice(0, Math.max(0, budget));
      budget -= shown.length;
      parts.push(section(group, el("div", { class: "scroll" },
        table(["run", "modified", ...names, "tables / error"], rows)),
        shared.length ? el("details", { class: "shared", open: shared.length <= 16 },
          el("summary", {}, `the same in every run (${shared.length})`),
          el("p", {}, shared.map((n) => el("span", { class: "chip" }, `${n} = ${num(runs[0].values[n])}`)))) : null,
        shown.length ? el("div", { class: "figures" }, shown.map(figure)) : null,
        figures.length > shown.length ? el("p", { class: "muted" },
          `${figures.length - shown.length} more figures not shown`) : null));
    }
    if (listing.figures.length) {
      parts.push(section("Other figures", el("div", { class: "figures" },
        listing.figures.slice(0, Math.max(0, budget)).map(figure))));
    }
    if (!listing.runs.length && !listing.figures.length) parts.push(el("p", { class: "empty" }, "No results yet."));
    fill($("#experiments"), parts);
  }

  function figure(path) {
    const img = el("img", { alt: path });
    fileUrl(path).then((url) => { img.src = url; }).catch((err) => { img.alt = `${path}: ${err.message}`; });
    const open = { click: (ev) => { ev.preventDefault(); openFile(path); } };
    return el("figure", {}, el("a", { href: "#experiments", title: `open ${path}`, on: open }, img),
      el("figcaption", {}, path));
  }

  async function fileUrl(path) {
    // An <img src> cannot send the key, so the file is fetched with it and shown from a blob.
    const res = await api("GET", `/v1/experiments/file?${query({ path })}`);
    // A blob URL runs with this page's origin: give it a type that can only be shown, never run.
    const type = /\.png$/i.test(path) ? "image/png" : "text/plain; charset=utf-8";
    const url = URL.createObjectURL(new Blob([await res.blob()], { type }));
    state.figureUrls.push(url);
    return url;
  }

  async function openFile(path) {
    await run(`opening ${path}`, async () => { window.open(await fileUrl(path), "_blank", "noopener"); });
  }

  // ------------------------------------------------------------------ navigation
  const VIEWS = { memories: loadMemories, story: null, recall: null, audit: null, experiments: loadExperiments };

  function show(name) {
    for (const v of ["welcome", ...Object.keys(VIEWS)]) $(`#view-${v}`).hidden = v !== name;
    for (const a of document.querySelectorAll("#tabs a")) a.classList.toggle("active", a.dataset.view === name);
  }

  async function route() {
    if (!key()) {
      show("welcome");
      return;
    }
    const [name, arg] = location.hash.slice(1).split("/");
    if (name === "story" && arg) {
      show("story");
      await run("loading the story", () => loadStory(decodeURIComponent(arg)));
    } else if (VIEWS[name] !== undefined) {
      show(name);
      if (VIEWS[name]) await run(`loading ${name}`, VIEWS[name]);
    } else {
      location.hash = "#memories";
    }
  }

  function openStore(givenKey) {
    sessionStorage.setItem(KEY, givenKey);
    $("#key-form").hidden = true;
    $("#session").hidden = false;
    $("#tabs").hidden = false;
  }

  function closeStore(message) {
    sessionStorage.removeItem(KEY);
    state.memories = [];
    state.byId.clear();
    for (const id of ["#memory-table tbody", "#story", "#recall", "#audit", "#experiments", "#users"]) fill($(id));
    $("#key-form").hidden = false;
    $("#session").hidden = true;
    $("#tabs").hidden = true;
    show("welcome");
    say(message || "Store closed: the key is forgotten in this tab.", message ? "error" : "info");
  }

  function submit(selector, label, work) {
    $(selector).addEventListener("submit", (ev) => {
      ev.preventDefault();
      run(label, work);
    });
  }

  function start() {
    for (const k of KINDS) $("#memory-filters").kind.append(el("option", { value: k }, k));
    for (const c of CATEGORIES) $("#memory-filters").category.append(el("option", { value: c }, c));
    $("#user").value = sessionStorage.getItem(USER) || "";
    $("#key-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      openStore($("#key").value.trim());
      $("#key").value = "";
      if (location.hash === "#memories") route(); else location.hash = "#memories";
    });
    $("#sign-out").addEventListener("click", () => closeStore());
    $("#user").addEventListener("change", () => {
      sessionStorage.setItem(USER, user());
      state.byId.clear();
      route();
    });
    $("#memory-filters").addEventListener("change", (ev) => {
      if (ev.target.name === "status" || ev.target.name === "q") renderMemories();
      else run("loading memories", loadMemories);
    });
    $("#memory-filters").q.addEventListener("input", () => renderMemories());
    submit("#memory-filters", "loading memories", loadMemories);
    $("#story-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      location.hash = `#story/${encodeURIComponent($("#story-form").memory.value.trim())}`;
    });
    submit("#recall-form", "recalling", loadRecall);
    submit("#audit-form", "auditing", loadAudit);
    submit("#experiments-form", "loading experiments", loadExperiments);
    window.addEventListener("hashchange", route);
    if (key()) openStore(key());
    route();
  }

  start();
})();
