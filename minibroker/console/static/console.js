// The minibroker console: one page calling the JSON API under /api/. Everything shown is
// put into the page as text (never as HTML): topic names, keys and values come from clients.
"use strict";

const main = document.getElementById("main");
const statusLine = document.getElementById("status");
let overview = {};
let timer = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "testid") node.dataset.testid = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function table(headers, rows) {
  return el("table", {},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { class: h.num ? "num" : null }, h.label || h)))),
    el("tbody", {}, rows));
}

function cell(value, numeric) {
  return el("td", { class: numeric ? "num" : null }, value === null || value === undefined ? "–" : value);
}

function say(text, isError) {
  statusLine.textContent = text;
  statusLine.className = isError ? "error" : "";
}

async function api(path, options) {
  const init = Object.assign({ headers: {} }, options || {});
  if (init.body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(init.body);
  }
  const response = await fetch("/api/" + path, init);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.message || response.status + " " + response.statusText);
  return body;
}

function formValues(form) {
  return Object.fromEntries(new FormData(form).entries());
}

function changeForm(testid, fields, submitLabel, onSubmit) {
  if (!overview.allow_changes) return null;
  const form = el("form", { testid },
    fields.map(([name, label, attrs]) => el("label", {}, label,
      attrs && attrs.multiline ? el("textarea", { name, testid: testid + "-" + name })
        : el("input", Object.assign({ name, testid: testid + "-" + name }, attrs || {})))),
    el("button", { type: "submit", testid: testid + "-submit" }, submitLabel));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      say(await onSubmit(formValues(form)) || "done");
      await show();
    } catch (error) {
      say(error.message, true);
    }
  });
  return form;
}

// --- pages ---

async function topicsPage() {
  const { topics } = await api("topics");
  const create = changeForm("create-topic",
    [["name", "name", { required: true }], ["partitions", "partitions", { type: "number", value: "1", min: "1" }]],
    "Create topic", async (v) => {
      await api("topics", { method: "POST", body: { name: v.name, partitions: Number(v.partitions) } });
      return "created " + v.name;
    });
  return [create, topics.map((topic) => el("section", { testid: "topic-" + topic.name },
    el("h2", {}, topic.name, topic.internal ? el("span", { class: "badge" }, "internal") : null,
      overview.allow_changes ? el("button", { type: "button", testid: "delete-topic-" + topic.name, onclick: async () => {
        if (!confirm("Delete topic " + topic.name + "?")) return;
        try { await api("topics/" + encodeURIComponent(topic.name), { method: "DELETE" }); say("deleted " + topic.name); await show(); }
        catch (error) { say(error.message, true); }
      } }, "Delete") : null),
    table(["partition", "leader", "replicas", "in sync", { label: "log start", num: 1 }, { label: "end", num: 1 }, { label: "last stable", num: 1 }, ""],
      topic.partitions.map((p) => el("tr", { testid: "topic-partition-" + topic.name + "-" + p.partition },
        cell(p.partition), cell(p.leader), cell(p.replicas.join(", ")), cell(p.isr.join(", ")),
        cell(p.log_start, 1), cell(p.end, 1), cell(p.last_stable, 1),
        el("td", {}, el("a", { href: "#messages?topic=" + encodeURIComponent(topic.name) + "&partition=" + p.partition }, "messages"))))),
    el("details", {}, el("summary", {}, "configs"),
      table(["name", "value", ""], Object.entries(topic.configs).map(([name, c]) =>
        el("tr", {}, cell(name), cell(c.value), cell(c.default ? "default" : "set"))))))),
  topics.length ? null : el("p", { class: "muted" }, "No topics.")];
}

function shownValue(shown) {
  if (shown === null || shown === undefined) return el("span", { class: "muted" }, "null");
  const views = [];
  if (shown.schema) {
    views.push(["schema " + shown.schema.id + " (" + shown.schema.type + ")",
      shown.schema.error || JSON.stringify(shown.schema.value, null, 2)]);
  }
  if (shown.json !== undefined) views.push(["json", JSON.stringify(shown.json, null, 2)]);
  if (shown.text !== undefined) views.push(["text", shown.text]);
  views.push(["hex", shown.hex.replace(/(..)/g, "$1 ").trim()]);
  const pick = el("select", {}, views.map(([name], i) => el("option", { value: String(i) }, name)));
  const body = el("pre", { class: "value" }, views[0][1]);
  pick.addEventListener("change", () => { body.textContent = views[Number(pick.value)][1]; });
  return el("div", {}, pick, " ", el("span", { class: "muted" }, shown.size + " B" + (shown.truncated ? ", cut" : "")), body);
}

async function messagesPage(params) {
  const { topics } = await api("topics");
  const topic = params.get("topic") || (topics.find((t) => !t.internal) || topics[0] || {}).name || "";
  const partition = params.get("partition") || "0";
  const browse = el("form", { testid: "browse" },
    el("label", {}, "topic", el("select", { name: "topic", testid: "browse-topic" },
      topics.map((t) => el("option", { value: t.name, selected: t.name === topic }, t.name)))),
    el("label", {}, "partition", el("input", { name: "partition", type: "number", min: "0", value: partition, testid: "browse-partition" })),
    el("label", {}, "from offset", el("input", { name: "offset", value: params.get("offset") || "", placeholder: "start; -10: last 10", testid: "browse-offset" })),
    el("label", {}, "or from time", el("input", { name: "time", type: "datetime-local", value: params.get("time") || "", testid: "browse-time" })),
    el("label", {}, "at most", el("input", { name: "limit", type: "number", value: params.get("limit") || "50", min: "1", max: "500" })),
    el("button", { type: "submit" }, "Show"));
  browse.addEventListener("submit", (event) => {
    event.preventDefault();
    const chosen = new URLSearchParams(Object.entries(formValues(browse)).filter(([, v]) => v !== ""));
    location.hash = "messages?" + chosen.toString();
  });
  const produce = changeForm("produce",
    [["topic", "topic", { value: topic, required: true }], ["partition", "partition", { type: "number", value: partition, min: "0" }],
      ["key", "key"], ["value", "value", { multiline: true }], ["headers", "headers (name=value a line)", { multiline: true }]],
    "Produce", async (v) => {
      const headers = {};
      for (const line of (v.headers || "").split("\n")) {
        const at = line.indexOf("=");
        if (at > 0) headers[line.slice(0, at).trim()] = line.slice(at + 1);
      }
      const done = await api("messages", { method: "POST", body: {
        topic: v.topic, partition: Number(v.partition || 0), key: v.key === "" ? null : v.key, value: v.value, headers } });
      return "produced at offset " + done.offset;
    });
  const parts = [el("section", {}, el("h2", {}, "Browse"), browse), produce ? el("section", {}, el("h2", {}, "Produce"), produce) : null];
  if (!topic) return parts.concat(el("p", { class: "muted" }, "No topics."));
  const query = new URLSearchParams({ topic, partition, limit: params.get("limit") || "50" });
  if (params.get("time")) query.set("time", String(new Date(params.get("time")).getTime()));
  else if (params.get("offset")) query.set("offset", params.get("offset"));
  const found = await api("messages?" + query.toString());
  parts.push(el("section", { testid: "messages" },
    el("h2", {}, found.topic + "-" + found.partition, el("span", { class: "muted" }, "  offsets " + found.log_start + "–" + found.end + ", from " + found.from)),
    table([{ label: "offset", num: 1 }, "time", "key", "headers", "value"], found.messages.map((m) =>
      el("tr", { testid: "message-" + m.offset },
        cell(m.offset, 1), cell(new Date(m.timestamp).toISOString()),
        el("td", {}, shownValue(m.key)),
        el("td", {}, m.headers.map((h) => el("div", {}, h.key + ": ", h.value ? h.value.text || h.value.hex : "null"))),
        el("td", {}, shownValue(m.value))))),
    found.unreadable.map((u) => el("p", { class: "muted" }, "batch at offset " + u.offset + " not shown: " + u.error))));
  return parts;
}

function timelineOf(group) {
  const history = group.timeline;
  if (!history || !history.generations || !history.generations.length) return null;
  return el("details", { testid: "timeline-" + group.group_id }, el("summary", {}, "rebalances (" + history.generations.length + ")"),
    table(["at", "generation", "members and their partitions"], history.generations.map((g) => el("tr", {},
      cell(new Date(g.at_ms).toISOString().slice(11, 23)), cell(g.generation),
      el("td", {}, g.members.map((m) => el("div", { class: m.partitions.length ? null : "idle" },
        m.member_id + " (" + m.client_id + "): " + (m.partitions.length ? m.partitions.map((p) => p.join("-")).join(", ") : "nothing"))))))));
}

async function groupsPage() {
  const { groups } = await api("groups");
  if (!groups.length) return el("p", { class: "muted" }, "No groups.");
  return groups.map((group) => {
    return el("section", { testid: "group-" + group.group_id },
      el("h2", {}, group.group_id, el("span", { class: "badge" }, group.type), el("span", { class: "badge" }, group.state),
        el("span", { class: "muted" }, "  epoch " + group.epoch)),
      el("h3", {}, "members"),
      table(["member", "client id", "host", "partitions"], group.members.map((m) =>
        el("tr", { testid: "member-" + m.member_id, class: m.idle ? "idle" : null },
          el("td", {}, m.member_id, m.idle ? el("span", { class: "badge idle-badge" }, "idle") : null),
          cell(m.client_id), cell(m.host), cell(m.partitions.map((p) => p.join("-")).join(", ") || "nothing")))),
      el("h3", {}, "partitions"),
      table(["partition", "owner", { label: "committed", num: 1 }, { label: "end", num: 1 }, { label: "lag", num: 1 }],
        group.partitions.map((p) => {
          return el("tr", { testid: "partition-" + p.topic + "-" + p.partition, class: p.stalled ? "stalled" : null },
            el("td", {}, p.topic + "-" + p.partition, p.stalled ? el("span", { class: "badge stalled-badge" }, "stalled") : null), cell(p.owner), cell(p.committed, 1), cell(p.end, 1),
            el("td", { class: "num lag", testid: "lag-" + p.topic + "-" + p.partition }, p.lag === null ? "–" : String(p.lag)));
        })),
      timelineOf(group));
  });
}

async function transactionsPage() {
  const { transactions } = await api("transactions");
  if (!transactions.length) return el("p", { class: "muted" }, "No transactional producers.");
  return el("section", {}, table(["transactional id", "producer id", "epoch", "state", "partitions", "groups"],
    transactions.map((t) => el("tr", { testid: "transaction-" + t.transactional_id },
      cell(t.transactional_id), cell(t.producer_id), cell(t.epoch), cell(t.state),
      cell(t.partitions.map((p) => p.join("-")).join(", ")), cell(t.groups.join(", "))))));
}

async function securityPage() {
  const found = await api("security");
  if (!found.enabled) return el("p", { class: "muted" }, "No SASL users: the broker's listeners do not authenticate.");
  return [el("section", {}, el("h2", {}, "users"), el("ul", {}, found.users.map((u) => el("li", {}, u)))),
    el("section", {}, el("h2", {}, "ACLs"), table(["resource", "name", "pattern", "principal", "host", "operation", "permission"],
      found.acls.map((a) => el("tr", {}, cell(a.resource_type), cell(a.resource_name), cell(a.pattern), cell(a.principal),
        cell(a.host), cell(a.operation), cell(a.permission)))))];
}

async function faultsPage() {
  const { faults } = await api("faults");
  const add = changeForm("add-fault", [["rule", "rule, e.g. Produce:error=NOT_LEADER_OR_FOLLOWER,times=3", { required: true, size: "50" }]],
    "Add rule", async (v) => { await api("faults", { method: "POST", body: { rule: v.rule } }); return "rule added"; });
  return [add, el("section", {}, faults.length ? table(["api", "client id", "group", "topic", "partition", "action", "times", "after", "hits", "acted", ""],
    faults.map((f) => el("tr", { testid: "fault-" + f.id },
      cell(f.api || "any"), cell(f.client_id), cell(f.group), cell(f.topic), cell(f.partition), cell(f.action),
      cell(f.times), cell(f.after), cell(f.hits, 1), cell(f.acted, 1),
      el("td", {}, overview.allow_changes ? el("button", { type: "button", onclick: async () => {
        try { await api("faults/" + f.id, { method: "DELETE" }); say("rule removed"); await show(); }
        catch (error) { say(error.message, true); }
      } }, "Remove") : null))))
    : el("p", { class: "muted" }, "No fault rules."))];
}

// The broker's timeline since the console started, drawn by the test report's renderer.
async function timelinePage() {
  const timeline = await api("timeline");
  if (!timeline) return el("p", { class: "muted" }, "Requests are not recorded (or are written to a file): no timeline.");
  const drawn = el("div", { testid: "timeline" });
  window.MinibrokerTimeline.render(drawn, timeline);
  return [el("p", { class: "muted", testid: "timeline-summary" }, window.MinibrokerTimeline.summary(timeline)), drawn];
}

const pages = { timeline: timelinePage, topics: topicsPage, messages: messagesPage, groups: groupsPage, transactions: transactionsPage, security: securityPage, faults: faultsPage };

async function show() {
  const [name, query] = (location.hash.slice(1) || "topics").split("?");
  const page = pages[name] || topicsPage;
  for (const link of document.querySelectorAll("nav a")) link.classList.toggle("current", link.dataset.page === name);
  try {
    const content = await page(new URLSearchParams(query || ""));
    // Keep what is being typed into a form across automatic refreshes.
    const typing = document.activeElement && document.activeElement.matches("input, textarea, select");
    if (timer && typing && main.contains(document.activeElement)) return;
    main.replaceChildren(...[content].flat().filter(Boolean));
    main.dataset.loaded = String(Date.now());
  } catch (error) {
    say(error.message, true);
  }
}

async function start() {
  try {
    overview = await api("overview");
    document.getElementById("overview").textContent = overview.cluster_id + " · bootstrap.servers=" + overview.bootstrap_servers +
      (overview.allow_changes ? "" : " · read-only");
  } catch (error) {
    say(error.message, true);
  }
  document.getElementById("refresh").addEventListener("click", show);
  document.getElementById("auto").addEventListener("change", (event) => {
    clearInterval(timer);
    timer = event.target.checked ? setInterval(show, 2000) : null;
  });
  window.addEventListener("hashchange", show);
  await show();
}

start();
