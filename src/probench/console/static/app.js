// probench console page. Plain JavaScript, no build step, no dependencies.
// Everything the server or the node sends is shown with textContent: prompt text and labels
// are data, never markup or code: no HTML is parsed from data and no code is built from strings.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const token = new URLSearchParams(location.search).get("token");
  const headers = { "Content-Type": "application/json" };
  if (token) headers["X-Probench-Token"] = token;

  const STALE_MS = 3000; // no frame for this long: the stream is marked stale
  const ACK_WAIT_MS = 15000; // a sent prompt not acknowledged by then is reported
  let pending = null; // {prompts, at}: sent, waiting for the node's LabelInfo
  let shown = { prompts: null, history: null, given: null, detections: null }; // last rendered lists (re-render on change only)
  let frames = 0;
  let frameTimes = [];
  let lastFrameAt = 0;
  let prevUrl = null;
  let ws = null;
  let latest = null; // the newest state (detections for a click on the stream)
  let frameSize = null; // {width, height} of the shown frame, in the detections' pixels

  // -- helpers ----------------------------------------------------------------------------
  function feedback(text, kind) {
    const el = $("prompt-feedback");
    el.textContent = text;
    el.className = kind;
  }
  function num(v, digits) {
    return typeof v === "number" && isFinite(v) ? v.toFixed(digits) : "–";
  }
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }
  function splitPrompts(text) {
    return text.split(";").map((s) => s.trim()).filter((s) => s.length > 0);
  }
  function sameList(a, b) {
    return a.length === b.length && a.every((x, i) => x === b[i]);
  }
  async function post(path, body) {
    let res;
    try {
      res = await fetch(path, {
        method: "POST", headers, body: JSON.stringify(body), cache: "no-store", credentials: "same-origin",
      });
    } catch (e) {
      return { ok: false, error: "the console is not reachable" };
    }
    let data = {};
    try {
      data = await res.json();
    } catch (e) {
      data = {};
    }
    return res.ok ? { ok: true, data } : { ok: false, error: data.error || `HTTP ${res.status}` };
  }

  // -- prompts ----------------------------------------------------------------------------
  async function sendPrompt(text) {
    if (splitPrompts(text).length === 0) {
      feedback("type one or more target descriptions, separated by ';'", "error");
      return;
    }
    feedback("sending…", "info");
    const r = await post("/api/prompt", { text });
    if (!r.ok) {
      feedback(r.error, "error");
      return;
    }
    pending = { prompts: r.data.expect || r.data.sent, at: Date.now() };
    feedback(`sent: ${r.data.sent.join("; ")} — waiting for the node…`, "info");
  }

  $("prompt-input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.isComposing) {
      e.preventDefault();
      sendPrompt($("prompt-input").value);
    }
  });
  $("prompt-send").addEventListener("click", () => sendPrompt($("prompt-input").value));

  // -- lifecycle --------------------------------------------------------------------------
  for (const button of document.querySelectorAll("button.transition")) {
    button.addEventListener("click", async () => {
      const transition = button.dataset.transition;
      for (const b of document.querySelectorAll("button.transition")) b.disabled = true;
      feedback(`${transition}…`, "info");
      const r = await post("/api/lifecycle", { transition });
      if (r.ok) feedback(`${transition}: the node is now ${r.data.state}`, "ok");
      else feedback(`${transition} failed: ${r.error}`, "error");
    });
  }

  // -- controls (node parameters) and the target ---------------------------------------------
  function controlFeedback(text, kind) {
    const e = $("control-feedback");
    e.textContent = text;
    e.className = kind;
  }
  async function setParam(name, value) {
    controlFeedback(`setting ${name}…`, "info");
    const r = await post("/api/param", { name, value });
    if (r.ok) controlFeedback(`${name} = ${r.data.value}: ${r.data.said}`, "ok");
    else controlFeedback(r.error, "error");
  }
  $("policy-set").addEventListener("click", () => setParam("prompt_policy", $("policy-select").value));
  $("threshold-set").addEventListener("click", () => {
    const v = $("threshold-input").value;
    setParam("score_threshold", v === "" ? null : Number(v));
  });

  async function selectTarget(trackId) {
    const r = await post("/api/target", { track_id: trackId });
    if (r.ok) controlFeedback(trackId === null ? "target cleared: the best detection again"
      : `target: track ${trackId} (sent)`, "ok");
    else controlFeedback(r.error, "error");
  }
  $("target-clear").addEventListener("click", () => selectTarget(null));

  // a click on the stream: the smallest tracked box under the pointer becomes the target
  $("stream").addEventListener("click", (ev) => {
    if (!latest || !frameSize) return;
    const r = $("stream").getBoundingClientRect();
    const x = (ev.clientX - r.left) * frameSize.width / r.width;
    const y = (ev.clientY - r.top) * frameSize.height / r.height;
    let best = null;
    for (const d of latest.detections) {
      const [x1, y1, x2, y2] = d.box;
      if (!d.track_id || x < x1 || x > x2 || y < y1 || y > y2) continue;
      const area = (x2 - x1) * (y2 - y1);
      if (!best || area < best.area) best = { area, id: d.track_id };
    }
    if (best) selectTarget(Number(best.id));
    else controlFeedback("no tracked detection there (the node's tracking parameter must be on)", "error");
  });

  function renderControls(s) {
    const select = $("policy-select");
    const policies = (s.controls && s.controls.prompt_policy) || [];
    if (select.options.length !== policies.length) {
      select.replaceChildren(...policies.map((p) => {
        const o = el("option", p);
        o.value = p;
        return o;
      }));
      const d = s.diagnostics;
      if (d && d.prompt_policy) select.value = d.prompt_policy;
    }
    $("threshold").textContent = num(s.threshold, 2);
    if ($("threshold-input").value === "" && typeof s.threshold === "number") {
      $("threshold-input").value = String(s.threshold.toFixed(2));
    }
    // chosen (a click): the track, highlighted; else the default, muted, with the track it is now
    const t = s.target;
    const what = t ? `track ${t.track_id}${t.prompt ? ` (${t.prompt})` : ""}` : "";
    $("target").textContent = t && t.chosen ? `${what}: chosen`
      : `the best detection of the first prompt${what ? `: ${what}` : ""}`;
    $("target").className = t && t.chosen ? "chosen" : "muted";
    placeTargetBox();
  }

  // the target's box on the stream: solid when chosen, dashed for the default
  function placeTargetBox() {
    const box = $("target-box");
    const t = latest && latest.target;
    const d = t && latest.detections.find((x) => x.track_id === t.track_id);
    const img = $("stream");
    if (!d || !frameSize || !img.getAttribute("src")) {
      box.className = "hidden";
      return;
    }
    const ir = img.getBoundingClientRect();
    const br = $("stream-box").getBoundingClientRect();
    const sx = ir.width / frameSize.width;
    const sy = ir.height / frameSize.height;
    const [x1, y1, x2, y2] = d.box;
    Object.assign(box.style, {
      left: `${ir.left - br.left + x1 * sx}px`, top: `${ir.top - br.top + y1 * sy}px`,
      width: `${(x2 - x1) * sx}px`, height: `${(y2 - y1) * sy}px`,
    });
    box.className = t.chosen ? "chosen" : "default";
    box.dataset.track = t.track_id;
  }

  // -- state ------------------------------------------------------------------------------
  function renderLifecycle(s) {
    const state = s.present ? s.lifecycle : "not found";
    const badge = $("lifecycle");
    badge.textContent = state;
    badge.className = "badge " + (s.present ? s.lifecycle.replace(/[^a-z]/g, "") : "err");
    $("btn-configure").disabled = !(s.present && s.lifecycle === "unconfigured");
    $("btn-activate").disabled = !(s.present && s.lifecycle === "inactive");
    $("btn-deactivate").disabled = !(s.present && s.lifecycle === "active");
  }

  function renderMetrics(s) {
    const d = s.diagnostics;
    if (!d) {
      for (const id of ["fps", "latency", "frames", "errors", "model", "diag"]) $(id).textContent = "–";
      $("diag").textContent = "no /diagnostics from the node yet";
      return;
    }
    $("fps").textContent = num(d.rate_hz, 1);
    $("latency").textContent = `${num(d.latency_p50_ms, 1)} / ${num(d.latency_p95_ms, 1)} ms`;
    $("frames").textContent = `${num(d.frames_processed, 0)} / ${num(d.frames_skipped, 0)}`;
    $("errors").textContent = `${num(d.errors, 0)} / ${num(d.prompts_rejected, 0)}`;
    $("model").textContent = [d.model, d.device, d.precision].filter((x) => x).join(" · ") || "–";
    const stale = typeof d.age_s === "number" && d.age_s > 5 ? ` (${num(d.age_s, 0)} s old)` : "";
    $("diag").textContent = `${d.level}: ${d.message}${stale}`;
    $("diag").className = d.level === "OK" && !stale ? "" : "warn";
  }

  function renderPolicy(s) {
    // the node's prompt policy and, per prompt, what the model gets (its /diagnostics), else
    // the derived forms (docs/PROMPTING.md)
    const d = s.diagnostics;
    $("policy").textContent = d && d.prompt_policy ? d.prompt_policy : "–";
    const lines = d && d.given && d.given.length
      ? d.given
      : (s.derived || []).map((f) => `${f.orig} → cat: ${f.cat} · tmpl: ${f.tmpl}`);
    const key = JSON.stringify(lines);
    if (key !== shown.given) {
      shown.given = key;
      $("given").replaceChildren(...lines.map((t) => el("li", t)));
    }
  }

  function renderPrompts(s) {
    const key = JSON.stringify(s.prompts);
    if (key !== shown.prompts) {
      shown.prompts = key;
      $("active-prompts").replaceChildren(...s.prompts.map((p) => el("li", p)));
    }
    renderPolicy(s);
    if (pending && sameList(s.prompts, pending.prompts)) {
      feedback(`active: ${pending.prompts.join("; ")} (acknowledged by the node)`, "ok");
      pending = null;
    } else if (pending && Date.now() - pending.at > ACK_WAIT_MS) {
      feedback(`the node has not acknowledged "${pending.prompts.join("; ")}" (see its log)`, "error");
      pending = null;
    }
  }

  function renderHistory(s) {
    const key = JSON.stringify(s.history);
    if (key === shown.history) return; // re-rendering under the pointer would swallow clicks
    shown.history = key;
    $("history").replaceChildren(...s.history.map((entry) => {
      const li = el("li");
      const b = el("button", entry);
      b.title = entry;
      b.addEventListener("click", () => {
        $("prompt-input").value = entry;
        sendPrompt(entry);
      });
      li.append(b);
      return li;
    }));
  }

  function renderDetections(s) {
    $("n-detections").textContent = `(${s.n_detections})`;
    const key = JSON.stringify([s.detections, s.target]);
    if (key === shown.detections) return; // re-rendering under the pointer would swallow clicks
    shown.detections = key;
    $("detections").tBodies[0].replaceChildren(...s.detections.map((d) => {
      const tr = el("tr");
      if (d.track_id) {
        tr.className = s.target && s.target.track_id === d.track_id ? "tracked target" : "tracked";
        tr.dataset.track = d.track_id;
        tr.title = "click: make this track the target";
        tr.addEventListener("click", () => selectTarget(Number(d.track_id)));
      }
      tr.append(el("td", d.label, "label"), el("td", num(d.score, 2)),
        el("td", d.track_id ? `#${d.track_id}` : ""),
        el("td", d.distance_m === null ? "" : `${num(d.distance_m, 2)} m`),
        el("td", d.box.map((v) => num(v, 0)).join(", ")));
      return tr;
    }));
  }

  function render(s) {
    latest = s;
    $("node-name").textContent = s.node;
    $("stream-source").textContent = s.stream.source;
    $("prompt-input").maxLength = s.limits.message_chars;
    renderLifecycle(s);
    renderMetrics(s);
    renderPrompts(s);
    renderHistory(s);
    renderDetections(s);
    renderControls(s);
  }

  // -- stream -----------------------------------------------------------------------------
  function showFrame(blob, meta) {
    const url = URL.createObjectURL(blob);
    const img = $("stream");
    img.src = url;
    img.decode().catch(() => {}).finally(() => {
      if (prevUrl) URL.revokeObjectURL(prevUrl);
      prevUrl = url;
      frames += 1;
      const now = performance.now();
      lastFrameAt = now;
      frameTimes.push(now);
      frameTimes = frameTimes.filter((t) => now - t <= 2000);
      $("stream-frames").textContent = String(frames);
      img.dataset.seq = meta ? String(meta.seq) : "";
      if (meta) {
        $("stream-size").textContent = `${meta.width}×${meta.height}`;
        frameSize = { width: meta.width, height: meta.height };
      }
      $("stream-empty").className = "hidden";
      placeTargetBox();
      if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "ack" }));
    });
  }

  setInterval(() => {
    const now = performance.now();
    frameTimes = frameTimes.filter((t) => now - t <= 2000);
    const span = frameTimes.length > 1 ? frameTimes[frameTimes.length - 1] - frameTimes[0] : 0;
    $("stream-fps").textContent = span > 0 ? ((frameTimes.length - 1) * 1000 / span).toFixed(1) : "0";
    const stale = frames > 0 && now - lastFrameAt > STALE_MS;
    $("stream-box").classList.toggle("stale", stale);
    if (stale) {
      $("stream-empty").className = "";
      $("stream-empty").textContent = "no new frames (node inactive or camera stopped?)";
    }
  }, 500);

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const query = token ? `?token=${encodeURIComponent(token)}` : "";
    let opened = false;
    let meta = null;
    ws = new WebSocket(`${scheme}://${location.host}/ws${query}`);
    ws.binaryType = "blob";
    ws.onopen = () => {
      opened = true;
      $("connection").textContent = "connected";
      $("connection").className = "badge ok";
    };
    ws.onmessage = (ev) => {
      if (typeof ev.data !== "string") {
        showFrame(ev.data, meta);
        return;
      }
      let m;
      try {
        m = JSON.parse(ev.data);
      } catch (e) {
        return;
      }
      if (m.type === "state") render(m);
      else if (m.type === "frame") meta = m;
    };
    ws.onclose = () => {
      $("connection").textContent = opened ? "disconnected, retrying…" : "refused or unreachable, retrying…";
      $("connection").className = "badge err";
      setTimeout(connect, opened ? 1000 : 3000);
    };
  }
  connect();
})();
