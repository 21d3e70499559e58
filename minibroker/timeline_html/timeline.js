/* The minibroker timeline: draws a timeline dict (version 1) into a page.
   Used inline by the test report and served as a file by the console:
   MinibrokerTimeline.render(element, timeline). Plain DOM and SVG, no libraries. */
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    setAll(node, attrs);
    add(node, children);
    return node;
  }
  function svg(tag, attrs, children) {
    var node = document.createElementNS(SVG, tag);
    setAll(node, attrs);
    add(node, children);
    return node;
  }
  function setAll(node, attrs) {
    for (var name in attrs || {}) {
      if (attrs[name] === null || attrs[name] === undefined || attrs[name] === false) continue;
      if (name === "text") node.textContent = String(attrs[name]);
      else if (name === "onclick") node.addEventListener("click", attrs[name]);
      else node.setAttribute(name, String(attrs[name]));
    }
  }
  function add(node, children) {
    if (children === undefined || children === null) return;
    if (!Array.isArray(children)) children = [children];
    children.forEach(function (child) {
      if (child === null || child === undefined) return;
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
  }
  function section(title, testid, children) {
    return el("section", { "data-testid": testid, class: "part" }, [el("h2", { text: title })].concat(children));
  }

  function clock(t0) {
    return function (ms) {
      var s = (ms - t0) / 1000;
      return (s >= 0 ? "+" : "") + s.toFixed(3) + " s";
    };
  }
  function wall(ms) {
    var d = new Date(ms);
    return d.toISOString().replace("T", " ").replace("Z", " UTC");
  }

  /* --- the time axis with client lanes, rebalances and faults --- */
  function lanes(tl, rel) {
    var t0 = tl.started_ms, t1 = Math.max(tl.ended_ms, t0 + 1);
    var left = 220, width = 1180, plot = width - left - 10, rowH = 22, top = 30;
    var clients = tl.clients || [];
    var byClient = {};
    clients.forEach(function (c, n) { byClient[c.client_id] = n; });
    var height = top + Math.max(clients.length, 1) * rowH + 10;
    var x = function (ms) { return left + ((ms - t0) / (t1 - t0)) * plot; };
    var root = svg("svg", { viewBox: "0 0 " + width + " " + height, class: "lanes", width: "100%" });
    for (var k = 0; k <= 10; k++) {
      var ms = t0 + ((t1 - t0) * k) / 10, px = x(ms);
      root.appendChild(svg("line", { x1: px, x2: px, y1: top - 6, y2: height, class: "tick" }));
      root.appendChild(svg("text", { x: px, y: top - 10, class: "axis", "text-anchor": "middle", text: rel(ms) }));
    }
    clients.forEach(function (c, n) {
      var y = top + n * rowH;
      root.appendChild(svg("text", { x: left - 8, y: y + 15, "text-anchor": "end", class: "lane-label", text: (c.client_id || "(no client id)") + " · " + c.requests }));
      root.appendChild(svg("rect", { x: x(c.first_ms), y: y + 4, width: Math.max(x(c.last_ms) - x(c.first_ms), 2), height: rowH - 8, class: "lane" }, svg("title", { text: (c.client_id || "") + (c.address ? " from " + c.address : "") + ": " + c.requests + " requests, " + c.errors + " with errors" + (c.connections !== undefined ? ", " + c.connections + " connections" : "") })));
    });
    var marks = document.createDocumentFragment();
    (tl.requests || []).forEach(function (r) {
      var n = byClient[r.client_id];
      if (n === undefined) return;
      var y = top + n * rowH, px = x(r.at_ms);
      marks.appendChild(svg("line", { x1: px, x2: px, y1: y + 3, y2: y + rowH - 3, class: r.errors && r.errors.length ? "mark mark-error" : "mark" }));
    });
    root.appendChild(marks);
    (tl.groups || []).forEach(function (g) {
      (g.generations || []).forEach(function (gen) {
        var px = x(gen.at_ms);
        root.appendChild(svg("line", { x1: px, x2: px, y1: top - 4, y2: height, class: "rebalance" }, svg("title", { text: g.group_id + " generation " + gen.generation + " at " + rel(gen.at_ms) })));
      });
    });
    (tl.faults || []).forEach(function (f) {
      var px = x(f.at_ms);
      root.appendChild(svg("circle", { cx: px, cy: top - 2, r: 4, class: "fault" }, svg("title", { text: "fault " + f.rule + ": " + f.action + " on " + f.api + " of " + f.client_id })));
    });
    var legend = el("p", { class: "legend" }, [
      el("span", { class: "key key-request", text: "request" }), el("span", { class: "key key-error", text: "request with errors" }),
      el("span", { class: "key key-rebalance", text: "group generation" }), el("span", { class: "key key-fault", text: "fault rule acted" })]);
    return section("Clients", "clients", [legend, el("div", { class: "scroll" }, root)]);
  }

  /* --- groups: generations and who held what --- */
  function partitionsText(parts) {
    if (!parts || !parts.length) return "nothing";
    return parts.map(function (tp) { return tp[0] + "-" + tp[1]; }).join(", ");
  }
  function groups(tl, rel) {
    var items = (tl.groups || []).map(function (g) {
      var gens = g.generations || [];
      var last = gens.length ? gens[gens.length - 1] : { members: [] };
      var idle = {};
      (g.idle_members || []).forEach(function (m) { idle[m] = true; });
      var current = el("ul", { class: "members" }, (last.members || []).map(function (m) {
        var isIdle = idle[m.member_id] || !(m.partitions && m.partitions.length);
        return el("li", { "data-testid": "member-" + m.member_id, class: isIdle ? "member idle" : "member" }, [
          el("code", { text: m.member_id }), " ", el("span", { class: "client", text: m.client_id || "" }), " ",
          isIdle ? el("strong", { class: "badge", text: "idle: holds no partition" }) : el("span", { text: partitionsText(m.partitions) })]);
      }));
      var rows = gens.map(function (gen) {
        return el("tr", {}, [
          el("td", { text: rel(gen.at_ms), title: wall(gen.at_ms) }),
          el("td", { text: gen.generation }),
          el("td", { text: gen.protocol || "" }),
          el("td", {}, el("ul", { class: "members compact" }, (gen.members || []).map(function (m) {
            var empty = !(m.partitions && m.partitions.length);
            return el("li", { class: empty ? "idle" : "" }, [el("code", { text: m.client_id || m.member_id, title: m.member_id }), ": " + partitionsText(m.partitions)]);
          })))]);
      });
      var idleCount = Object.keys(idle).length;
      return el("div", { "data-testid": "group-" + g.group_id, class: idleCount ? "group has-idle" : "group" }, [
        el("h3", {}, [el("code", { text: g.group_id }), " ", el("span", { class: "meta", text: g.type + " group, " + (g.state || "?") + ", " + gens.length + " generation" + (gens.length === 1 ? "" : "s") }),
          idleCount ? el("span", { class: "badge", text: idleCount + " idle member" + (idleCount === 1 ? "" : "s") }) : null]),
        el("h4", { text: "Members in the last generation" }), current,
        el("details", { open: gens.length <= 12 ? "" : null }, [el("summary", { text: "Generations (rebalances)" }),
          el("table", {}, [el("thead", {}, el("tr", {}, ["at", "generation", "protocol", "who held what"].map(function (h) { return el("th", { text: h }); }))), el("tbody", {}, rows)])])]);
    });
    return section("Groups", "groups", items.length ? items : [el("p", { text: "No groups." })]);
  }

  /* --- partitions: end offsets, committed offsets and lag over time --- */
  var COLOURS = ["#2a6fdb", "#17a34a", "#9333ea", "#d97706", "#0891b2", "#be185d"];
  function chart(tl, p, rel) {
    var w = 420, h = 120, pad = 30;
    var t0 = tl.started_ms, t1 = Math.max(tl.ended_ms, t0 + 1);
    var series = [{ name: "log end", points: p.end_offsets || [], cls: "end" }];
    var groupsOf = Object.keys(p.committed || {});
    groupsOf.forEach(function (gid, n) { series.push({ name: "committed by " + gid, points: p.committed[gid], colour: COLOURS[n % COLOURS.length] }); });
    var top = 1;
    series.forEach(function (s) { s.points.forEach(function (pt) { top = Math.max(top, pt[1]); }); });
    var x = function (ms) { return pad + ((ms - t0) / (t1 - t0)) * (w - pad - 5); };
    var y = function (v) { return h - 15 - (v / top) * (h - 25); };
    var root = svg("svg", { viewBox: "0 0 " + w + " " + h, class: "chart", width: w, height: h });
    root.appendChild(svg("line", { x1: pad, x2: w - 5, y1: h - 15, y2: h - 15, class: "tick" }));
    root.appendChild(svg("text", { x: pad - 3, y: y(top) + 4, "text-anchor": "end", class: "axis", text: top }));
    root.appendChild(svg("text", { x: pad, y: h - 2, class: "axis", text: rel(t0) }));
    root.appendChild(svg("text", { x: w - 5, y: h - 2, "text-anchor": "end", class: "axis", text: rel(t1) }));
    series.forEach(function (s) {
      if (!s.points.length) return;
      // A step line: an offset holds until the next sample.
      var d = "", prev = null;
      s.points.forEach(function (pt, n) {
        var px = x(pt[0]).toFixed(1), py = y(pt[1]).toFixed(1);
        d += n === 0 ? "M" + px + " " + py : "H" + px + "V" + py;
        prev = pt;
      });
      d += "H" + x(Math.max(prev[0], t1)).toFixed(1);
      root.appendChild(svg("path", { d: d, class: "series " + (s.cls || ""), stroke: s.colour || null }, svg("title", { text: s.name })));
    });
    return root;
  }
  function lastOf(points) { return points && points.length ? points[points.length - 1][1] : null; }
  function partitions(tl, rel) {
    var items = (tl.partitions || []).map(function (p) {
      var stalled = p.stalled || [];
      var lagText = Object.keys(p.lag || {}).map(function (gid) {
        var pts = p.lag[gid], first = pts.length ? pts[0][1] : null, last = lastOf(pts);
        var max = 0;
        pts.forEach(function (pt) { max = Math.max(max, pt[1]); });
        return el("li", { class: stalled.indexOf(gid) >= 0 ? "lag stalled-group" : "lag" }, [el("code", { text: gid }), ": lag " + (last === null ? "?" : last) + " (max " + max + (first !== null ? ", first " + first : "") + ")" + (stalled.indexOf(gid) >= 0 ? " — stalled" : "")]);
      });
      return el("div", { "data-testid": "partition-" + p.topic + "-" + p.partition, class: stalled.length ? "partition stalled" : "partition" }, [
        el("h3", {}, [el("code", { text: p.topic + "-" + p.partition }), " ", el("span", { class: "meta", text: "log end " + (lastOf(p.end_offsets) === null ? "?" : lastOf(p.end_offsets)) }),
          stalled.length ? el("span", { class: "badge", text: "stalled for " + stalled.join(", ") }) : null]),
        chart(tl, p, rel), el("ul", { class: "lags" }, lagText)]);
    });
    var legend = el("p", { class: "legend" }, [el("span", { class: "key key-end", text: "log end offset" }), el("span", { text: "coloured: committed offset of each group; lag is log end minus committed" })]);
    return section("Partitions", "partitions", items.length ? [legend, el("div", { class: "grid" }, items)] : [el("p", { text: "No partitions." })]);
  }

  function table(headers, rows) {
    return el("table", {}, [el("thead", {}, el("tr", {}, headers.map(function (h) { return el("th", { text: h }); }))), el("tbody", {}, rows)]);
  }
  function transactions(tl, rel) {
    var rows = [];
    (tl.transactions || []).forEach(function (t) {
      (t.events || []).forEach(function (e) {
        rows.push(el("tr", { class: "txn-" + e.event }, [el("td", { text: rel(e.at_ms) }), el("td", {}, el("code", { text: t.transactional_id })), el("td", { text: t.producer_id }), el("td", { text: e.event }), el("td", { text: e.detail === undefined ? "" : typeof e.detail === "string" ? e.detail : JSON.stringify(e.detail) })]));
      });
    });
    return section("Transactions", "transactions", rows.length ? [table(["at", "transactional id", "producer id", "event", "detail"], rows)] : [el("p", { text: "No transactions." })]);
  }
  function faults(tl, rel) {
    var rows = (tl.faults || []).map(function (f) {
      return el("tr", {}, [el("td", { text: rel(f.at_ms) }), el("td", { text: f.rule }), el("td", { text: f.api }), el("td", { text: f.client_id }), el("td", { text: f.action })]);
    });
    return section("Fault rules that acted", "faults", rows.length ? [table(["at", "rule", "API", "client", "action"], rows)] : [el("p", { text: "No fault rule acted." })]);
  }
  function share(tl, rel) {
    var rows = [];
    (tl.share || []).forEach(function (s) {
      (s.deliveries || []).forEach(function (d) {
        rows.push(el("tr", { class: d.delivery_count > 1 ? "redelivery" : "" }, [el("td", { text: rel(d.at_ms) }), el("td", {}, el("code", { text: s.group_id })), el("td", { text: s.topic + "-" + s.partition }), el("td", { text: d.offset }), el("td", { text: d.delivery_count }), el("td", { text: d.member_id }), el("td", { text: d.outcome || "" })]));
      });
    });
    return section("Share-group deliveries", "share", rows.length ? [table(["at", "group", "partition", "offset", "delivery", "member", "outcome"], rows)] : [el("p", { text: "No share-group deliveries." })]);
  }

  /* --- requests: a row each, details on click --- */
  function requests(tl, rel) {
    var list = tl.requests || [];
    var detail = el("div", { "data-testid": "request-detail", class: "detail" }, el("p", { class: "hint", text: "Click a request to see it decoded." }));
    var body = el("tbody");
    var rows = list.map(function (r, n) {
      var failed = r.errors && r.errors.length;
      return el("tr", { "data-testid": "request-" + r.i, "data-n": n, class: failed ? "request error" : "request" }, [
        el("td", { text: rel(r.at_ms), title: wall(r.at_ms) }), el("td", { text: r.node }), el("td", { text: r.client_id }),
        el("td", { text: r.api + " v" + r.version }), el("td", { text: r.correlation_id }), el("td", { text: failed ? r.errors.join(", ") : "" })]);
    });
    // One listener for every row: a long recording has tens of thousands of them.
    body.addEventListener("click", function (event) {
      var row = event.target.closest("tr.request");
      if (row) show(list[Number(row.getAttribute("data-n"))], row);
    });
    function searchText(r) {
      return (r.api + " " + r.client_id + " " + (r.errors || []).join(" ")).toLowerCase();
    }
    var selected = null;
    function show(r, row) {
      if (selected) selected.classList.remove("selected");
      selected = row;
      row.classList.add("selected");
      detail.textContent = "";
      add(detail, [el("h3", { text: r.api + " v" + r.version + " from " + r.client_id + " (correlation id " + r.correlation_id + ", node " + r.node + ")" }),
        r.errors && r.errors.length ? el("p", { class: "badge", text: r.errors.join(", ") }) : null]);
      if (!r.detail) {
        detail.appendChild(el("p", { class: "hint", text: "Its decoded form was not kept: a report keeps a bounded number (errors first, then the newest)." }));
        return;
      }
      detail.appendChild(el("h4", { text: "Request" }));
      detail.appendChild(el("pre", { text: JSON.stringify(r.detail.request, null, 2) }));
      detail.appendChild(el("h4", { text: "Answer" }));
      detail.appendChild(el("pre", { text: JSON.stringify(r.detail.response, null, 2) }));
    }
    var errorsOnly = el("input", { type: "checkbox", id: "errors-only" });
    var filter = el("input", { type: "search", placeholder: "filter: API, client id or error", id: "request-filter" });
    function apply() {
      var words = filter.value.toLowerCase().trim();
      rows.forEach(function (row, n) {
        var hidden = (errorsOnly.checked && !row.classList.contains("error")) || (words && searchText(list[n]).indexOf(words) < 0);
        row.hidden = !!hidden;
      });
    }
    filter.addEventListener("input", apply);
    errorsOnly.addEventListener("change", apply);
    var fragment = document.createDocumentFragment();
    rows.forEach(function (row) { fragment.appendChild(row); });
    body.appendChild(fragment);
    var errorCount = list.filter(function (r) { return r.errors && r.errors.length; }).length;
    return section("Requests", "requests", [
      el("p", { class: "controls" }, [list.length + " requests, " + errorCount + " with errors. ", filter, " ", el("label", {}, [errorsOnly, " errors only"])]),
      el("div", { class: "split" }, [el("div", { class: "requests-table" }, el("table", {}, [el("thead", {}, el("tr", {}, ["at", "node", "client", "API", "correlation", "errors"].map(function (h) { return el("th", { text: h }); }))), body])), detail])]);
  }

  function render(container, tl) {
    var rel = clock(tl.started_ms);
    container.textContent = "";
    var parts = [lanes(tl, rel), groups(tl, rel), partitions(tl, rel), requests(tl, rel), transactions(tl, rel), faults(tl, rel)];
    if ((tl.share || []).length) parts.push(share(tl, rel));
    add(container, parts);
  }
  function summary(tl) {
    var text = wall(tl.started_ms) + " to " + wall(tl.ended_ms) + " (" + ((tl.ended_ms - tl.started_ms) / 1000).toFixed(3) + " s): " +
      (tl.clients || []).length + " clients, " + (tl.requests || []).length + " requests, " + (tl.groups || []).length + " groups, " + (tl.partitions || []).length + " partitions.";
    if (tl.details && tl.details.shown < (tl.requests || []).length)
      text += " Decoded detail kept for " + tl.details.shown + " of them (errors first, then the newest).";
    if (tl.requests_omitted) text += " " + tl.requests_omitted + " older requests are left out of the list.";
    if (tl.complete === false)
      text += " The recording dropped its oldest requests" + (tl.dropped ? " (" + tl.dropped + ")" : "") + ": the start is missing.";
    return text;
  }

  window.MinibrokerTimeline = { render: render, summary: summary };
  var data = document.getElementById("timeline-data");
  var target = document.getElementById("timeline");
  if (data && target) {
    var tl = JSON.parse(data.textContent);
    var line = document.getElementById("summary");
    if (line) {
      line.textContent = summary(tl);
      if (tl.complete === false) line.className = "incomplete";
    }
    render(target, tl);
  }
})();
