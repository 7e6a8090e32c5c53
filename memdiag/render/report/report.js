/* memdiag interactive report. Builds the page from the embedded JSON with textContent only:
   transcript text never becomes markup. No network, no external assets. */
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("memdiag-data").textContent);
  var SECTIONS = DATA.sections;
  var SECTION_LABEL = {system: "system", scratchpad: "pinned scratchpad", summary: "summary",
    memories: "memories", messages: "messages"};
  var SECTION_COLOR = {system: "#4c78a8", scratchpad: "#b279a2", summary: "#d4a514",
    memories: "#72b7b2", messages: "#54a24b"};
  var FACT_COLORS = ["#e45756", "#4c78a8", "#f58518", "#54a24b", "#b279a2", "#9d755d",
    "#eeca3b", "#72b7b2", "#ff9da6", "#bab0ac"];
  var LAYER_COLOR = {none: "#1e8449", short_term: "#e45756", long_term: "#9d3d9d"};
  var ROWS_SHOWN = 300;
  var CHECKPOINT = 64;

  var app = document.getElementById("app");
  var S = {run: 0, turn: 1, focus: null, card: null, cause: null, showAll: {}};
  var R = null; // the current run, with caches
  var pending = false;
  var ui = {};

  // --- small DOM helpers (text only) -----------------------------------------------------
  function h(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) {
      var c = arguments[i];
      if (c === null || c === undefined) continue;
      parent.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    }
    return parent;
  }
  function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }
  var MECHANISM = {evicted: "evicted", summarized_away: "summarized away", unpinned: "unpinned",
    compacted: "compacted"};
  /* a fact's loss in words; a session end is no eviction: the fact lasted its whole session */
  function lossWords(turn, mechanism) {
    if (mechanism === "session_end") return "kept to session end (turn " + (turn - 1) + ")";
    return (MECHANISM[mechanism] || mechanism || "lost") + " at turn " + turn;
  }
  function val(x, i) { return typeof x === "number" ? x : (x[i] || 0); }
  function factColor(k) { return FACT_COLORS[k % FACT_COLORS.length]; }
  function clamp(n, lo, hi) { return Math.max(lo, Math.min(hi, n)); }

  // --- the run: messages, turns, windows rebuilt from deltas ------------------------------
  /* the transcript's own failures (`forgot` markers): message index → fact */
  function markerFailures(run) {
    var out = [];
    Object.keys(run.messages.forgot || {}).forEach(function (i) {
      out.push({index: +i, id: run.messages.id[+i], turn: run.messages.turn[+i], fact: run.messages.forgot[i]});
    });
    return out.sort(function (a, b) { return a.turn - b.turn; });
  }

  function prepare(run) {
    var r = {run: run, T: run.turns.user.length, msg: run.messages, strategies: run.strategies};
    r.failures = markerFailures(run);
    r.byFact = {};
    run.facts.forEach(function (f, k) {
      f.evidence.forEach(function (i) { (r.byFact[i] = r.byFact[i] || []).push(k); });
    });
    r.system = [];
    if (run.keep_system) {
      run.messages.role.forEach(function (role, i) { if (role === "system") r.system.push(i); });
    }
    r.sessionStarts = [];
    var prev = null;
    run.turns.user.forEach(function (u, t) {
      var s = run.messages.session[u];
      if (prev !== null && s !== prev) r.sessionStarts.push(t + 1);
      prev = s;
    });
    r.strategies.forEach(function (s) { s._n = s.entered.length; s._cp = null; s._memo = null; });
    return r;
  }

  function applyTurn(s, i, set) {
    var k;
    for (k = 0; k < s.dropped[i].length; k++) set.delete(s.dropped[i][k]);
    for (k = 0; k < s.entered[i].length; k++) set.add(s.entered[i][k]);
    for (k = 0; k < s.evicted[i].length; k++) set.delete(s.evicted[i][k]);
    for (k = 0; k < s.summarized[i].length; k++) set.delete(s.summarized[i][k]);
  }
  function sorted(set) { return Array.from(set).sort(function (a, b) { return a - b; }); }

  function checkpoints(s) {
    if (s._cp) return s._cp;
    var set = new Set(), cps = [];
    for (var i = 0; i < s._n; i++) {
      applyTurn(s, i, set);
      if (i % CHECKPOINT === 0) cps.push(sorted(set));
    }
    s._cp = cps;
    return cps;
  }

  /* message indices in the window of strategy s at its turn position i (0-based) */
  function windowAt(s, i) {
    if (i < 0 || i >= s._n) return [];
    // stepping turn by turn asks for i and i-1: keep the last few windows
    s._memo = s._memo || [];
    for (var q = 0; q < s._memo.length; q++) if (s._memo[q][0] === i) return s._memo[q][1];
    var w = rebuild(s, i);
    s._memo.push([i, w]);
    if (s._memo.length > 4) s._memo.shift();
    return w;
  }
  function rebuild(s, i) {
    var c = Math.floor(i / CHECKPOINT), cps = checkpoints(s);
    if (i === c * CHECKPOINT) return cps[c];
    var set = new Set(cps[c]);
    for (var j = c * CHECKPOINT + 1; j <= i; j++) applyTurn(s, j, set);
    return sorted(set);
  }

  function textAt(changes, turn) {
    var lo = 0, hi = changes.length - 1, found = null;
    while (lo <= hi) {
      var mid = (lo + hi) >> 1;
      if (changes[mid][0] <= turn) { found = changes[mid]; lo = mid + 1; } else hi = mid - 1;
    }
    return found ? found[1] : [];
  }

  function factState(s, k, turn) {
    var f = s.facts[k], last = null;
    if (!f) return null;
    for (var j = 0; j < f.history.length; j++) {
      if (f.history[j][0] <= turn) last = f.history[j]; else break;
    }
    return last;
  }

  function holder(s, k, win, summaryLines, pinnedLines) {
    var ev = R.run.facts[k].evidence, inwin = new Set(win);
    for (var j = 0; j < ev.length; j++) if (inwin.has(ev[j])) return "verbatim";
    var lf = R.run.line_facts;
    for (j = 0; j < pinnedLines.length; j++) if (lf[pinnedLines[j]].indexOf(k) >= 0) return "pinned";
    for (j = 0; j < summaryLines.length; j++) if (lf[summaryLines[j]].indexOf(k) >= 0) return "summary";
    return "memories";
  }

  // --- popover: a message's text, role, session, tokens ------------------------------------
  function showPop(i, anchor, pin) {
    var m = R.msg, pop = ui.pop;
    if (pop.classList.contains("pinned") && !pin) return;
    pop.textContent = "";
    var hd = h("div", "hd");
    add(hd, h("b", null, m.id[i]), " · " + m.role[i] + " · session " +
      R.run.sessions[m.session[i]] + " · turn " + m.turn[i] + " · " + m.tokens[i] + " tokens");
    add(pop, hd);
    var facts = R.byFact[i] || [];
    facts.forEach(function (k) {
      var d = h("div", "dim");
      var sw = h("span", "sw"); sw.style.background = factColor(k);
      add(d, sw, "states: " + R.run.facts[k].fact);
      add(pop, d);
    });
    if (m.forgot[String(i)]) add(pop, h("div", "no", "forgot: " + m.forgot[String(i)]));
    add(pop, h("div", "body", m.text[i]));
    pop.style.display = "block";
    pop.classList.toggle("pinned", !!pin);
    var rect = anchor.getBoundingClientRect();
    var top = rect.bottom + 4, left = rect.left;
    var w = Math.min(560, window.innerWidth - 20);
    if (left + w > window.innerWidth - 10) left = Math.max(10, window.innerWidth - w - 10);
    if (top + 200 > window.innerHeight) top = Math.max(10, rect.top - Math.min(pop.offsetHeight, window.innerHeight * 0.6) - 4);
    pop.style.left = left + "px"; pop.style.top = top + "px";
    pop.dataset.i = String(i);
  }
  function hidePop(force) {
    if (!force && ui.pop.classList.contains("pinned")) return;
    ui.pop.style.display = "none"; ui.pop.classList.remove("pinned");
  }
  function msgTarget(e) {
    var el = e.target;
    while (el && el !== document.body) {
      if (el.dataset && el.dataset.i !== undefined && el.id !== "pop") return el;
      el = el.parentNode;
    }
    return null;
  }

  // --- rows of messages ---------------------------------------------------------------------
  function msgRow(i, cls, why) {
    var m = R.msg, row = h("div", "row" + (cls ? " " + cls : ""));
    row.dataset.i = String(i);
    var facts = R.byFact[i];
    if (facts) {
      row.classList.add("ev");
      row.style.borderLeftColor = factColor(S.focus !== null && facts.indexOf(S.focus) >= 0 ? S.focus : facts[0]);
      row.dataset.facts = facts.join(",");
    }
    add(row, h("span", "id", m.id[i]), h("span", "role", m.role[i]), h("span", "tk", m.tokens[i]),
      h("span", "pv", m.text[i].slice(0, 240).replace(/\s+/g, " ")));
    if (why) add(row, h("span", "why", why));
    return row;
  }

  function textBlock(lines, kind) {
    var div = h("div", "text");
    lines.forEach(function (li) {
      var ln = h("span", "ln", R.run.lines[li]);
      var facts = R.run.line_facts[li];
      if (facts.length) {
        ln.classList.add("hl");
        ln.dataset.facts = facts.join(",");
        ln.title = "states: " + facts.map(function (k) { return R.run.facts[k].fact; }).join("; ");
        ln.style.boxShadow = "inset 3px 0 0 " + factColor(facts[0]);
      }
      add(div, ln);
    });
    div.dataset.kind = kind;
    return div;
  }

  function section(name, tokens, body, empty) {
    var sec = h("div", "sec sec-" + name + (empty ? " empty" : ""));
    var head = h("h4");
    var sw = h("i"); sw.style.cssText = "display:inline-block;width:9px;height:9px;margin-right:4px;background:" + SECTION_COLOR[name];
    var label = h("span"); add(label, sw, SECTION_LABEL[name]);
    add(head, label, h("span", "tok", tokens + " tokens"));
    add(sec, head);
    if (body) add(sec, body);
    return sec;
  }

  // --- one strategy column at the current turn -----------------------------------------------
  function column(s) {
    var turn = S.turn, i = turn - s.first_turn;
    var col = h("div", "col");
    col.dataset.strategy = s.name;
    if (S.card !== null && cardStrategy(S.card) === s.name) col.classList.add("diagnosed");
    var head = h("div", "colhead");
    var tot = 0, tk = {};
    SECTIONS.forEach(function (sec) { tk[sec] = i >= 0 && i < s._n ? val(s.tokens[sec], i) : 0; tot += tk[sec]; });
    add(head, h("b", null, s.name), " ", h("span", "dim", tot + " / " + s.budget + " tokens"));
    if (s.overflow.indexOf(turn) >= 0) add(head, " ", h("span", "no", "over budget"));
    var bar = h("div", "bar");
    SECTIONS.forEach(function (sec) {
      if (!tk[sec]) return;
      var sp = h("span"); sp.style.width = (100 * tk[sec] / Math.max(s.budget, tot)).toFixed(2) + "%";
      sp.style.background = SECTION_COLOR[sec]; sp.title = SECTION_LABEL[sec] + " " + tk[sec];
      add(bar, sp);
    });
    add(head, bar);
    add(col, head);
    if (i < 0 || i >= s._n) { add(col, h("div", "sec dim", "not replayed at this turn")); return col; }

    var win = windowAt(s, i), prevWin = i > 0 ? windowAt(s, i - 1) : [];
    var summaryLines = textAt(s.summary, turn), pinnedLines = textAt(s.pinned, turn);

    // facts at this turn
    if (R.run.facts.length) {
      var fs = h("div", "fs");
      R.run.facts.forEach(function (f, k) {
        var st = factState(s, k, turn), d = h("div");
        d.dataset.fact = String(k);
        var sw = h("span", "sw"); sw.style.background = factColor(k);
        var txt;
        if (!st) { txt = "not stated yet"; d.className = "dim"; d.dataset.state = "unstated"; }
        else if (st[1] === "kept") {
          txt = "kept (" + holder(s, k, win, summaryLines, pinnedLines) + ")"; d.className = "yes"; d.dataset.state = "kept";
        } else {
          txt = st[2] === "session_end" ? "not in this session's window (" + lossWords(st[0], st[2]) + ")"
            : lossWords(st[0], st[2]);
          d.className = st[2] === "session_end" ? "dim" : "no"; d.dataset.state = "lost";
        }
        if (st && st[0] === turn && st[1] === "lost") { txt = "LEFT NOW: " + txt; d.dataset.now = "lost"; }
        add(d, sw, f.fact + ": " + txt);
        d.title = f.fact + ": " + txt;
        add(fs, d);
      });
      add(col, fs);
    }

    // what entered and what left since turn N-1
    var prevSet = new Set(prevWin), winSet = new Set(win);
    var diff = h("div", "diff");
    diff.dataset.role = "diff";
    var entered = s.entered[i].filter(function (x) { return winSet.has(x); });
    var left = [];
    var why = {};
    s.dropped[i].forEach(function (x) { why[x] = "session end"; });
    s.evicted[i].forEach(function (x) { why[x] = "evicted"; });
    s.summarized[i].forEach(function (x) { why[x] = "summarized"; });
    Object.keys(why).forEach(function (x) { left.push(+x); });
    left.sort(function (a, b) { return a - b; });
    add(diff, h("h4", null, "since turn " + (turn - 1) + ": +" + entered.length + " entered, −" + left.length + " left"));
    var lrows = h("div", "rows left-rows");
    left.forEach(function (x) {
      var r = msgRow(x, "left", why[x] + (prevSet.has(x) ? "" : " (same turn)"));
      r.dataset.left = why[x];
      add(lrows, r);
    });
    if (left.length) add(diff, lrows);
    add(col, diff);

    // sections in window order
    var user = R.run.turns.user[turn - 1];
    var sys = R.system.filter(function (x) { return x <= user; });
    var sysRows = h("div", "rows");
    sys.forEach(function (x) { add(sysRows, msgRow(x)); });
    add(col, section("system", tk.system, sys.length ? sysRows : null, !tk.system));
    add(col, section("scratchpad", tk.scratchpad, pinnedLines.length ? textBlock(pinnedLines, "pinned") : null, !tk.scratchpad));
    add(col, section("summary", tk.summary, summaryLines.length ? textBlock(summaryLines, "summary") : null, !tk.summary));
    var mem = null;
    if (R.run.memories && tk.memories) { mem = h("div", "text", R.run.memories); }
    add(col, section("memories", tk.memories, mem, !tk.memories));
    var rows = h("div", "rows msg-rows");
    var enteredSet = new Set(entered);
    var start = 0;
    if (win.length > ROWS_SHOWN && !S.showAll[s.name]) {
      start = win.length - ROWS_SHOWN;
      var more = h("button", "more", "show " + start + " older messages");
      more.addEventListener("click", function () { S.showAll[s.name] = true; render(); });
      add(rows, more);
    }
    for (var j = start; j < win.length; j++) add(rows, msgRow(win[j], enteredSet.has(win[j]) ? "new" : ""));
    var msec = section("messages", tk.messages, rows, !win.length);
    msec.querySelector("h4 .tok").textContent = win.length + " messages, " + tk.messages + " tokens";
    add(col, msec);
    return col;
  }

  // --- timeline ------------------------------------------------------------------------------
  /* turn n occupies the n-th of T equal bins; markers and the cursor sit at its middle */
  function xOf(turn) { return 100 * (turn - 0.5) / Math.max(1, R.T); }
  function turnAt(f) { return clamp(Math.floor(f * R.T) + 1, 1, R.T); }

  function drawStrip(canvas, s) {
    var w = Math.max(50, canvas.clientWidth || 600), hgt = 30, dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(w * dpr); canvas.height = Math.round(hgt * dpr);
    var ctx = canvas.getContext("2d");
    ctx.scale(dpr, dpr);
    var T = Math.max(1, R.T), budget = Math.max(1, s.budget), bin = w / T;
    if (bin >= 3) {
      // few turns: one stacked bar per turn, by section
      for (var i = 0; i < s._n; i++) {
        var x0 = (s.first_turn + i - 1) * bin, y = hgt;
        for (var k = 0; k < SECTIONS.length; k++) {
          var n = val(s.tokens[SECTIONS[k]], i);
          if (!n) continue;
          var dy = Math.min(y, (n / budget) * (hgt - 2));
          ctx.fillStyle = SECTION_COLOR[SECTIONS[k]];
          ctx.fillRect(x0 + 1, y - dy, Math.max(1, bin - 2), dy);
          y -= dy;
        }
        if (s.overflow.indexOf(s.first_turn + i) >= 0) { ctx.fillStyle = "#c0392b"; ctx.fillRect(x0 + 1, 0, Math.max(1, bin - 2), 2); }
      }
      return;
    }
    // many turns: the largest window of each pixel column
    var px = new Float32Array(Math.ceil(w) + 1);
    for (i = 0; i < s._n; i++) {
      var tot = 0;
      for (k = 0; k < SECTIONS.length; k++) tot += val(s.tokens[SECTIONS[k]], i);
      var x = Math.floor((s.first_turn + i - 1) * bin);
      if (tot > px[x]) px[x] = tot;
    }
    for (x = 0; x < px.length; x++) {
      if (!px[x]) continue;
      var yy = Math.min(1, px[x] / budget) * (hgt - 2);
      ctx.fillStyle = px[x] > budget ? "#e45756" : "#7fa3cc";
      ctx.fillRect(x, hgt - yy, 1, yy);
    }
  }

  function marker(cls, turn, title, onclick) {
    var m = h("div", "mk " + cls);
    m.style.left = xOf(turn) + "%";
    m.title = title;
    m.dataset.turn = String(turn);
    m.addEventListener("click", function (e) { e.stopPropagation(); onclick ? onclick() : setTurn(turn); });
    return m;
  }

  function buildTimeline() {
    var tl = h("div", "tl");
    tl.id = "timeline";
    ui.strips = [];
    var cards = R.run.cards;
    if (cards.length) {
      var row = h("div", "tlrow"); row.dataset.row = "failures";
      add(row, h("span", "lbl", cards[0].type === "check" ? "checks" : "failures"));
      var marks = h("div", "marks");
      cards.forEach(function (c, ci) {
        if (!c.turn) return;
        var mk = marker("fail", c.turn, cardTitle(c), function () { selectCard(ci); });
        mk.dataset.card = String(ci);
        add(marks, mk);
      });
      add(row, marks);
      add(tl, row);
    } else if (R.failures.length) {
      var frow = h("div", "tlrow"); frow.dataset.row = "failures";
      add(frow, h("span", "lbl", "failures"));
      var fmarks = h("div", "marks");
      R.failures.forEach(function (f) {
        var mk = marker("fail", f.turn, "forgot “" + f.fact + "” at turn " + f.turn + " (" + f.id + ")");
        mk.dataset.failure = f.id;
        add(fmarks, mk);
      });
      add(frow, fmarks);
      add(tl, frow);
    }
    R.strategies.forEach(function (s) {
      var row = h("div", "tlrow"); row.dataset.strategy = s.name;
      var cv = h("canvas"); add(row, h("span", "lbl", s.name), cv);
      var marks = h("div", "marks");
      s.facts.forEach(function (f, k) {
        f.history.forEach(function (ev) {
          var fact = R.run.facts[k].fact;
          var mk = ev[1] === "lost"
            ? marker("", ev[0], s.name + ": “" + fact + "”: " + lossWords(ev[0], ev[2]))
            : (ev[0] !== f.stated_at_turn ? marker("back", ev[0], s.name + ": “" + fact + "” back at turn " + ev[0]) : null);
          if (!mk) return;
          mk.style[ev[1] === "lost" ? "borderTopColor" : "borderBottomColor"] = factColor(k);
          mk.dataset.fact = String(k); mk.dataset.event = ev[1];
          add(marks, mk);
        });
      });
      add(row, marks);
      add(tl, row);
      ui.strips.push([cv, s]);
    });
    var comps = R.run.compactions || [];
    if (comps.length) {
      var crow = h("div", "tlrow"); crow.dataset.row = "compactions";
      add(crow, h("span", "lbl", "compactions"));
      var cmarks = h("div", "marks");
      comps.forEach(function (c) {
        var turn = clamp(c.after_turn + 1, 1, R.T);
        var mk = marker("compact", turn, compactionTitle(c));
        mk.dataset.compaction = String(c.index);
        add(cmarks, mk);
      });
      add(crow, cmarks);
      add(tl, crow);
    }
    if (R.sessionStarts.length <= 400) {
      R.sessionStarts.forEach(function (t) {
        var d = h("div", "sess"); d.style.left = "calc(120px + (100% - 128px) * " + (xOf(t) / 100) + ")"; add(tl, d);
      });
    }
    ui.cursor = h("div", "cursor"); add(tl, ui.cursor);
    tl.addEventListener("click", function (e) {
      var c = ui.strips.length ? ui.strips[0][0] : null;
      if (!c) return;
      var r = c.getBoundingClientRect();
      if (e.clientX < r.left) return;
      var f = clamp((e.clientX - r.left) / Math.max(1, r.width), 0, 1);
      setTurn(turnAt(f));
    });
    return tl;
  }

  function compactionTitle(c) {
    var size = (c.tokens_before != null ? c.tokens_before : "?") + " → " +
      (c.tokens_after != null ? c.tokens_after : "?") + " tokens" +
      (c.tokens_after_source === "recounted" ? " (after: recounted)" : "");
    return "compaction " + c.index + (c.line != null ? " at line " + c.line : "") +
      (c.trigger ? " (" + c.trigger + ")" : "") + ": " + size + "; kept " + c.kept.length +
      ", dropped " + c.dropped.length + " of the instructions and strong facts before it";
  }

  function compactionList() {
    var wrap = h("div", "compactions");
    (R.run.compactions || []).forEach(function (c) {
      var box = h("details", "compaction");
      box.open = c.dropped.length > 0;
      add(box, h("summary", null, compactionTitle(c) + (c.ts ? " · " + c.ts : "")));
      if (c.dropped.length) {
        add(box, h("div", "no", "what this compaction forgot:"));
        var ul = h("ul");
        c.dropped.forEach(function (st) {
          var keepers = Object.keys(st.kept_by || {}).filter(function (k) { return st.kept_by[k]; });
          var what = st.kept_by ? " (what-if: " + (keepers.length ? "kept by " + keepers.join(", ") : "no simulated strategy keeps it") + ")" : "";
          add(ul, h("li", null, "turn " + st.turn + ": " + st.text + what));
        });
        add(box, ul);
      }
      if (c.kept.length) {
        add(box, h("div", "yes", "kept by its summary:"));
        var ul2 = h("ul");
        c.kept.forEach(function (st) { add(ul2, h("li", null, "turn " + st.turn + ": " + st.text)); });
        add(box, ul2);
      }
      add(box, h("div", "dim", "its summary:"));
      add(box, h("pre", "summary-text", c.summary));
      var go = h("button", null, "go to the turn after it");
      go.addEventListener("click", function () { setTurn(clamp(c.after_turn + 1, 1, R.T)); });
      add(box, go);
      add(wrap, box);
    });
    return wrap;
  }

  function redrawStrips() { ui.strips.forEach(function (p) { drawStrip(p[0], p[1]); }); }

  // --- cards (diagnose verdicts, check cases) -----------------------------------------------
  function cardStrategy(ci) {
    var c = R.run.cards[ci];
    return c ? c.strategy : null;
  }
  function cardTitle(c) {
    if (c.type === "check") return (c.passed ? "passed: " : "FAILED: ") + c.name;
    var d = c.diagnosis;
    return d.verdict + ": “" + d.fact + "” at turn " + d.at_turn;
  }

  function idChip(id) {
    var idx = R.msg.id.indexOf(id);
    var chip = h("code", null, id);
    if (idx >= 0) { chip.dataset.i = String(idx); chip.style.cursor = "pointer"; }
    return chip;
  }

  function detailValue(v) {
    if (v === null || v === undefined) return "–";
    if (typeof v !== "object") return String(v);
    if (Array.isArray(v)) return v.map(detailValue).join(", ");
    return Object.keys(v).map(function (k) { return words(k) + " " + detailValue(v[k]); }).join(", ");
  }
  /* a JSON key as words: "window_tokens" → "window tokens" */
  function words(key) { return String(key).replace(/_/g, " "); }
  var LAYER_WORDS = {short_term: "short-term layer", long_term: "long-term layer", none: "no layer failed"};

  /* rows of words (label, value, quote, id) made by memdiag.render.words, as the console shows */
  function wordGrid(lines) {
    var grid = h("div", "grid");
    lines.forEach(function (ln) {
      var v = h("div", "v" + (ln.style === "dim" ? " dim" : ""));
      var text = ln.value || "";
      if (ln.id && text.indexOf(ln.id) === 0) { add(v, idChip(ln.id)); text = text.slice(ln.id.length); }
      add(v, text);
      if (ln.quote) add(v, (text ? " " : ""), h("q", null, ln.quote));
      add(grid, h("div", "lb", ln.label), v);
    });
    return grid;
  }

  function diagnosisCard(c, ci) {
    var d = c.diagnosis, det = d.details || {};
    var card = h("div", "card layer-" + d.layer);
    card.style.borderLeftColor = LAYER_COLOR[d.layer] || "#888";
    add(card, h("h3", null, "forgot “" + d.fact + "” at turn " + d.at_turn + (d.marker_id ? " (" + d.marker_id + ")" : "")));
    var p = h("p");
    add(p, h("span", "verdict", d.verdict), " — " + (LAYER_WORDS[d.layer] || words(d.layer)));
    add(card, p);
    var jumps = h("p");
    var j1 = h("button", "jump", "failure: turn " + d.at_turn);
    j1.dataset.jump = "failure";
    j1.addEventListener("click", function (e) { e.stopPropagation(); selectCard(ci); });
    add(jumps, j1);
    if (c.cause_turn) {
      var j2 = h("button", "jump", "cause: turn " + c.cause_turn + " (" + (MECHANISM[c.cause] || c.cause || "left") + ")");
      j2.dataset.jump = "cause";
      j2.addEventListener("click", function (e) { e.stopPropagation(); selectCard(ci, true); });
      add(jumps, j2);
    }
    add(card, jumps);
    if (c.lines && c.lines.length) {
      var shown = {verdict: 1, layer: 1, "what-if": 1, fix: 1};
      var rows = [], keep = false;
      c.lines.forEach(function (ln) {
        if (ln.label) keep = !shown[ln.label];
        if (keep) rows.push(ln);
      });
      add(card, wordGrid(rows));
    } else if (d.evidence && d.evidence.length) {
      var ul = h("ul");
      d.evidence.filter(function (e) { return e.stated !== false; }).forEach(function (e) {
        var li = h("li");
        add(li, idChip(e.id), " turn " + e.turn + ", " + e.method + " " + Number(e.score).toFixed(2) + ": ", h("q", null, e.text));
        add(ul, li);
      });
      add(card, h("div", "dim", "evidence"), ul);
    }
    var wi = det.what_if;
    if (wi) {
      var tb = h("table"), tr = h("tr");
      add(tr, h("th", null, "strategy"), h("th", null, "keeps it at " + (det.budget || "the same") + " tokens"));
      add(tb, tr);
      Object.keys(wi.kept_by_strategy || {}).forEach(function (name) {
        var kept = wi.kept_by_strategy[name], r = h("tr");
        add(r, h("td", null, name), h("td", kept ? "yes" : "no", kept ? "✓ kept" : "✗ lost"));
        add(tb, r);
      });
      add(card, h("div", "dim", "what if"), tb);
      var sb = wi.smallest_sliding_window_budget;
      var sp = h("p");
      add(sp, "smallest sliding-window budget that keeps it: ",
        h("span", "big", sb === null || sb === undefined ? "none" : String(sb)), sb ? " tokens" : "");
      add(card, sp);
    }
    var skip = {what_if: 1};
    var keys = c.lines && c.lines.length ? [] : Object.keys(det).filter(function (k) { return !skip[k]; });
    if (keys.length) {  // a card without its rows of words (an older document): keys as words
      var g = h("div", "grid");
      keys.forEach(function (k) { add(g, h("div", "lb", words(k)), h("div", "v", detailValue(det[k]))); });
      add(card, g);
    }
    if (d.fixes && d.fixes.length) {
      var fx = h("ul");
      d.fixes.forEach(function (f) { add(fx, h("li", null, f)); });
      add(card, h("div", "dim", "fixes"), fx);
    }
    return card;
  }

  function checkCard(c, ci) {
    var card = h("div", "card " + (c.passed ? "passed" : "failed"));
    add(card, h("h3", null, (c.passed ? "✓ " : "✗ ") + c.name));
    add(card, h("p", "dim", (c.strategy ? c.strategy + ", " : "") + "spec line " + c.line));
    if (c.failures.length) {
      var ul = h("ul");
      c.failures.forEach(function (f) { add(ul, h("li", "no", f)); });
      add(card, ul);
    }
    var jumps = h("p");
    var j = h("button", "jump", "turn " + c.turn);
    j.dataset.jump = "failure";
    j.addEventListener("click", function (e) { e.stopPropagation(); selectCard(ci); });
    add(jumps, j);
    if (c.cause_turn) {
      var j2 = h("button", "jump", "left at turn " + c.cause_turn + " (" + (c.cause || "left") + ")");
      j2.dataset.jump = "cause";
      j2.addEventListener("click", function (e) { e.stopPropagation(); selectCard(ci, true); });
      add(jumps, j2);
    }
    add(card, jumps);
    return card;
  }

  function caseTable() {
    var tb = h("table", "cases"), tr = h("tr");
    tb.id = "cases";
    add(tr, h("th", null, ""), h("th", null, "case"), h("th", null, "failures"));
    add(tb, tr);
    DATA.cases.forEach(function (c) {
      var r = h("tr", c.run === S.run ? "current" : "");
      r.dataset.run = c.run === null ? "" : String(c.run);
      add(r, h("td", c.passed ? "yes" : "no", c.passed ? "✓" : "✗"), h("td", null, c.name),
        h("td", "no", c.failures.join("; ")));
      if (c.run !== null) {
        r.style.cursor = "pointer";
        r.title = "show this case's timeline";
        r.addEventListener("click", function () { mount(c.run); });
      }
      add(tb, r);
    });
    return tb;
  }

  function buildCards() {
    var cards = R.run.cards;
    if (!cards.length) return null;
    var wrap = h("div", "cards");
    wrap.id = "cards";
    cards.forEach(function (c, ci) {
      var card = c.type === "check" ? checkCard(c, ci) : diagnosisCard(c, ci);
      card.dataset.card = String(ci);
      card.addEventListener("click", function (e) {
        if (msgTarget(e)) return;
        selectCard(ci);
      });
      add(wrap, card);
    });
    return wrap;
  }

  function selectCard(ci, toCause) {
    var c = R.run.cards[ci];
    S.card = ci;
    if (c.fact_index !== null && c.fact_index !== undefined) S.focus = c.fact_index;
    S.cause = c.cause_turn || null;
    Array.prototype.forEach.call(document.querySelectorAll(".card"), function (el) {
      el.classList.toggle("active", el.dataset.card === String(ci));
    });
    Array.prototype.forEach.call(document.querySelectorAll(".fact"), function (el) {
      el.classList.toggle("focus", el.dataset.fact === String(S.focus));
    });
    markCause();
    setTurn(toCause && c.cause_turn ? c.cause_turn : (c.turn || S.turn));
    ui.timeline.scrollIntoView({block: "nearest"});
  }

  function markCause() {
    Array.prototype.forEach.call(document.querySelectorAll(".mk.cause"), function (el) { el.classList.remove("cause"); });
    if (S.cause === null) return;
    var c = R.run.cards[S.card];
    var sel = '.tlrow[data-strategy="' + (c && c.strategy ? c.strategy.replace(/["\\]/g, "") : "") + '"] .mk[data-event="lost"]';
    Array.prototype.forEach.call(document.querySelectorAll(sel), function (el) {
      if (+el.dataset.turn === S.cause && (S.focus === null || +el.dataset.fact === S.focus)) el.classList.add("cause");
    });
  }

  // --- turn changes ---------------------------------------------------------------------------
  function setTurn(n) {
    n = clamp(Math.round(n) || 1, 1, Math.max(1, R.T));
    S.turn = n;
    if (!pending) { pending = true; requestAnimationFrame(function () { pending = false; render(); }); }
  }

  /* the first turn a tracked fact left a window (a session end is no loss), or null */
  function firstLoss() {
    var first = null;
    R.strategies.forEach(function (s) {
      s.facts.forEach(function (f) {
        f.history.forEach(function (ev) {
          if (ev[1] === "lost" && ev[2] !== "session_end" && (first === null || ev[0] < first)) first = ev[0];
        });
      });
    });
    return first;
  }

  /* the answer of a replay: each tracked fact's fate under each strategy, each loss a link */
  function survivalTable() {
    var tb = h("table", "survival"), tr = h("tr");
    tb.id = "survival";
    add(tr, h("th", null, "fact"), h("th", null, "stated"));
    R.strategies.forEach(function (s) { add(tr, h("th", null, s.name)); });
    add(tb, tr);
    R.run.facts.forEach(function (fact, k) {
      var r = h("tr"), first = R.strategies.length ? R.strategies[0].facts[k] : null;
      var sw = h("span", "sw"); sw.style.background = factColor(k);
      var name = h("td"); add(name, sw, fact.fact);
      var stated = first && first.stated_at_turn ? "turn " + first.stated_at_turn : "never";
      add(r, name, h("td", null, stated));
      R.strategies.forEach(function (s) {
        var f = s.facts[k], td;
        if (!f || f.stated_at_turn === null || f.stated_at_turn === undefined) {
          td = h("td", "dim", "never stated");
        } else if (f.lost_at_turn === null || f.lost_at_turn === undefined) {
          var by = {verbatim: "kept verbatim", summary: "kept in the summary", pinned: "kept pinned",
            memories: "kept (memories)"}[f.kept_by] || "kept";
          td = h("td", "yes", by);
        } else {
          td = h("td", f.mechanism === "session_end" ? "yes" : "no", lossWords(f.lost_at_turn, f.mechanism));
          var losses = f.history.filter(function (ev) { return ev[1] === "lost" && ev[2] !== "session_end"; });
          if (losses.length) {  // the loss is a link to its turn
            var at = losses[0][0];
            td.classList.add("link");
            td.title = "show turn " + at;
            td.dataset.turn = String(at);
            td.addEventListener("click", function () { setTurn(at); });
          }
        }
        td.dataset.strategy = s.name;
        add(r, td);
      });
      add(tb, r);
    });
    return tb;
  }

  function nextEvent(dir) {
    var turns = [];
    R.strategies.forEach(function (s) {
      s.facts.forEach(function (f) { f.history.forEach(function (ev) { if (ev[1] === "lost") turns.push(ev[0]); }); });
    });
    R.run.cards.forEach(function (c) { if (c.turn) turns.push(c.turn); if (c.cause_turn) turns.push(c.cause_turn); });
    R.failures.forEach(function (f) { turns.push(f.turn); });
    turns.sort(function (a, b) { return a - b; });
    var t = null;
    if (dir > 0) { for (var i = 0; i < turns.length; i++) if (turns[i] > S.turn) { t = turns[i]; break; } }
    else { for (i = turns.length - 1; i >= 0; i--) if (turns[i] < S.turn) { t = turns[i]; break; } }
    if (t !== null) setTurn(t);
  }

  function render() {
    var T = R.T, turn = S.turn;
    if (!T) return;
    var user = R.run.turns.user[turn - 1];
    ui.label.textContent = "turn " + turn + " / " + T + " · session " + R.run.sessions[R.msg.session[user]] +
      ", turn " + R.run.turns.session_turn[turn - 1];
    ui.scrub.value = String(turn);
    ui.cursor.style.left = "calc(120px + (100% - 128px) * " + (xOf(turn) / 100) + ")";
    document.body.dataset.turn = String(turn);
    var cols = ui.cols;
    var frag = document.createDocumentFragment();
    R.strategies.forEach(function (s) { frag.appendChild(column(s)); });
    cols.textContent = "";
    cols.appendChild(frag);
    ui.userRow.textContent = "";
    add(ui.userRow, h("span", "dim", "user message of this turn: "), msgRow(user));
    clearTimeout(hashTimer); // the address remembers the turn (browsers throttle rapid updates)
    hashTimer = setTimeout(function () {
      try { history.replaceState(null, "", "#run=" + S.run + "&turn=" + S.turn); } catch (e) { /* file:// quirks */ }
    }, 300);
  }
  var hashTimer = null;

  function factChips() {
    var wrap = h("div", "facts");
    R.run.facts.forEach(function (f, k) {
      var chip = h("span", "fact");
      chip.dataset.fact = String(k);
      var sw = h("span", "sw"); sw.style.background = factColor(k);
      add(chip, sw, f.fact);
      chip.title = f.evidence.length ? "stated in " + f.evidence.map(function (i) { return R.msg.id[i]; }).join(", ") : "never stated";
      chip.addEventListener("click", function () {
        S.focus = S.focus === k ? null : k;
        Array.prototype.forEach.call(wrap.children, function (el) { el.classList.toggle("focus", el.dataset.fact === String(S.focus)); });
        render();
      });
      add(wrap, chip);
    });
    return wrap;
  }

  function mount(runIndex) {
    S.run = runIndex; S.card = null; S.cause = null; S.focus = null; S.showAll = {};
    R = DATA.runs.length ? prepare(DATA.runs[runIndex]) : null;
    app.textContent = "";
    add(app, h("h1", null, DATA.title));
    if (DATA.cases) {
      var passed = DATA.cases.filter(function (c) { return c.passed; }).length;
      add(app, h("p", "meta", passed + " of " + DATA.cases.length + " case(s) passed"));
      add(app, caseTable());
    }
    if (!R) { add(app, h("p", "dim", "No case replays a transcript, so there is no timeline.")); return; }
    if (DATA.runs.length > 1) {
      var sel = h("select"); sel.id = "run";
      DATA.runs.forEach(function (r, k) { var o = h("option", null, r.name); o.value = String(k); add(sel, o); });
      sel.value = String(runIndex);
      sel.addEventListener("change", function () { mount(+sel.value); });
      var p = h("p"); add(p, DATA.kind === "check" ? "case: " : "run: ", sel); add(app, p);
    }
    var run = R.run;
    add(app, h("p", "meta", run.transcript + " — " + plural(run.messages.id.length, "message") + ", " +
      plural(R.T, "turn") + ", " + plural(run.sessions.length, "session") + "; encoding " + run.encoding + ", budget " + run.budget + " tokens; memdiag " + DATA.memdiag));
    var cards = buildCards();
    if (cards) {
      add(app, h("h2", null, DATA.kind === "check" ? "Expectations of “" + run.name + "”" : "Diagnoses"));
      add(app, cards);
    }
    if (run.facts.length) {
      add(app, h("h2", null, "Tracked facts" + (run.facts[0].found ? " (found by memdiag)" : "")));
      add(app, factChips());
      if (DATA.kind === "replay") {
        add(app, h("h2", null, "Fact survival"));
        add(app, survivalTable());
      }
    }
    add(app, h("h2", null, "Timeline"));
    if (!R.T) { add(app, h("p", "dim", "No user messages, so no turn to show.")); return; }
    var controls = h("div", "controls");
    function btn(label, title, fn) { var b = h("button", null, label); b.title = title; b.addEventListener("click", fn); return b; }
    ui.label = h("span", "turn");
    ui.label.id = "turn-label";
    add(controls, btn("« first", "first turn (Home)", function () { setTurn(1); }),
      btn("◀", "previous turn (←)", function () { setTurn(S.turn - 1); }), ui.label,
      btn("▶", "next turn (→)", function () { setTurn(S.turn + 1); }),
      btn("last »", "last turn (End)", function () { setTurn(R.T); }),
      btn("◀ event", "previous loss or failure (p)", function () { nextEvent(-1); }),
      btn("event ▶", "next loss or failure (n)", function () { nextEvent(1); }),
      h("span", "keys", "keys: ← → (shift: ×10), Home/End, n/p: next/previous event, Esc"));
    add(app, controls);
    ui.scrub = h("input"); ui.scrub.type = "range"; ui.scrub.id = "scrub";
    ui.scrub.min = "1"; ui.scrub.max = String(R.T); ui.scrub.step = "1";
    ui.scrub.addEventListener("input", function () { setTurn(+ui.scrub.value); });
    add(app, ui.scrub);
    ui.timeline = buildTimeline();
    add(app, ui.timeline);
    if ((run.compactions || []).length) {
      add(app, h("h2", null, "Compactions the agent recorded"));
      add(app, compactionList());
    }
    var legend = h("div", "legend");
    add(legend, h("span", null, "window:"));
    SECTIONS.forEach(function (sec) { var sp = h("span"); var i = h("i"); i.style.background = SECTION_COLOR[sec]; add(sp, i, SECTION_LABEL[sec]); add(legend, sp); });
    add(legend, h("span", null, "▼ a tracked fact left the window · ▲ back · ◆ failure" +
      ((run.compactions || []).length ? " · ■ compaction" : "")));
    add(app, legend);
    add(app, h("h2", null, "The window at this turn"));
    ui.userRow = h("div"); add(app, ui.userRow);
    ui.cols = h("div", "cols");
    ui.cols.style.gridTemplateColumns = "repeat(" + R.strategies.length + ", minmax(280px, 1fr))";
    add(app, ui.cols);
    redrawStrips();
    var start = 1;
    var m = /turn=(\d+)/.exec(location.hash || "");
    var mr = /run=(\d+)/.exec(location.hash || "");
    if (m && (!mr || +mr[1] === runIndex)) start = +m[1];
    else if (run.cards.length && run.cards[0].turn) start = run.cards[0].turn;
    else start = firstLoss() || (R.failures.length ? R.failures[0].turn : R.T);
    S.turn = clamp(start, 1, R.T);
    render();
  }

  // --- global events ----------------------------------------------------------------------------
  document.addEventListener("keydown", function (e) {
    var tag = (e.target && e.target.tagName) || "";
    if (tag === "SELECT" || tag === "TEXTAREA" || (tag === "INPUT" && e.target.type !== "range")) return;
    if (!R || !R.T) return;
    var step = e.shiftKey ? 10 : 1;
    if (e.key === "ArrowRight") setTurn(S.turn + step);
    else if (e.key === "ArrowLeft") setTurn(S.turn - step);
    else if (e.key === "Home") setTurn(1);
    else if (e.key === "End") setTurn(R.T);
    else if (e.key === "n") nextEvent(1);
    else if (e.key === "p") nextEvent(-1);
    else if (e.key === "Escape") { hidePop(true); return; }
    else return;
    e.preventDefault();
  });
  document.addEventListener("mouseover", function (e) {
    var t = msgTarget(e);
    if (t) showPop(+t.dataset.i, t, false);
  });
  document.addEventListener("mouseout", function (e) {
    var t = msgTarget(e);
    if (t && !(e.relatedTarget && t.contains(e.relatedTarget))) hidePop(false);
  });
  document.addEventListener("click", function (e) {
    var t = msgTarget(e);
    if (t) { e.stopPropagation(); showPop(+t.dataset.i, t, true); return; }
    if (!ui.pop.contains(e.target)) hidePop(true);
  }, true);
  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () { if (ui.strips) redrawStrips(); }, 100);
  });

  ui.pop = h("div"); ui.pop.id = "pop"; document.body.appendChild(ui.pop);
  var t0 = performance.now();
  mount(0);
  window.memdiag = {
    data: DATA,
    turn: function () { return S.turn; },
    setTurn: function (n) { setTurn(n); },
    /* render turn n now and return the milliseconds it took (benchmarks) */
    renderNow: function (n) {
      var t = performance.now();
      S.turn = clamp(Math.round(n) || 1, 1, Math.max(1, R.T));
      render();
      void app.offsetHeight; // include style and layout
      return performance.now() - t;
    },
    run: function (k) { mount(k); },
    openedMs: performance.now() - t0
  };
  document.body.dataset.ready = "1";
})();
