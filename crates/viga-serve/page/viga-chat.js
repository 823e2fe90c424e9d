// The chat page: signs in over the server's /chat WebSocket, shows which Blender serves the
// user and its add-on tools, sends requests, and shows each one being carried out (tool
// calls with their arguments and results, looks at the scene, the answer). No framework, no
// build step: the server ships this file as it is. Everything from the server is shown as
// text (textContent), never as HTML.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const state = {
    socket: null,
    username: "",
    token: "",
    signedIn: false,
    running: null,       // the query id of the request being carried out
    entries: new Map(),  // query id -> its entry's elements
    retryMs: 1000,
  };

  const newId = () =>
    (crypto.randomUUID ? crypto.randomUUID() : String(Date.now()) + Math.random().toString(16).slice(2));

  function send(message) {
    if (!state.socket || state.socket.readyState !== WebSocket.OPEN) {
      showRequestError("not connected to the server; trying again…");
      return null;
    }
    const id = newId();
    state.socket.send(JSON.stringify(Object.assign({ message_id: id }, message)));
    return id;
  }

  // ------------------------------------------------------------------ connection

  const pending = new Map(); // message id -> what to do with its response

  function connect() {
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const socket = new WebSocket(scheme + "//" + location.host + "/chat");
    state.socket = socket;
    $("connection").textContent = "connecting…";
    socket.addEventListener("open", () => {
      state.retryMs = 1000;
      const id = send({ type: "hello", username: state.username, token: state.token });
      pending.set(id, onHello);
    });
    socket.addEventListener("message", (event) => {
      let message;
      try { message = JSON.parse(event.data); } catch (_) { return; }
      receive(message);
    });
    socket.addEventListener("close", (event) => {
      state.socket = null;
      if (!state.signedIn) return;
      $("connection").textContent = event.code === 1001
        ? "the server stopped; reconnecting when it is back…"
        : "connection lost; reconnecting…";
      setTimeout(connect, state.retryMs);
      state.retryMs = Math.min(state.retryMs * 2, 30000);
    });
  }

  function onHello(response) {
    if (!response.ok) {
      state.signedIn = false;
      state.token = "";
      $("login-error").textContent = response.error || "refused";
      $("login-error").hidden = false;
      $("login").hidden = false;
      $("chat").hidden = true;
      state.socket && state.socket.close();
      return;
    }
    state.signedIn = true;
    $("login").hidden = true;
    $("chat").hidden = false;
    $("connection").textContent = "signed in as " + response.result.user;
    if (state.running) recover(state.running);
  }

  // After reconnecting: how the request this page was following went. Its recorded lines
  // come again (the ones already shown are skipped by their sequence numbers).
  function recover(queryId) {
    const id = send({ type: "recover", query_id: queryId });
    if (!id) return;
    pending.set(id, (response) => {
      const parts = state.entries.get(queryId);
      const found = response.ok ? response.result.state : "unknown";
      if (found === "running") {
        if (parts) parts.status.textContent = "still working…";
        return;
      }
      if (found === "unknown" && parts && state.running === queryId) {
        parts.status.textContent = "lost";
        addLine(parts, "finished failed", "the server has no record of this request (it stopped before keeping one); send it again if it is still wanted");
        setRunning(null);
      }
    });
  }

  function receive(message) {
    switch (message.type) {
      case "response": {
        const handler = pending.get(message.message_id);
        pending.delete(message.message_id);
        if (handler) handler(message);
        else if (!message.ok) showRequestError(message.error);
        break;
      }
      case "blender": showBlender(message.status); break;
      case "progress": showProgress(message.query_id, message.record); break;
      case "request": entryFor(message.query_id, message.text); break;
      case "view": showView(message); break;
    }
  }

  // ------------------------------------------------------------------ the Blender

  function showBlender(status) {
    const kind = $("blender-kind");
    kind.textContent = { desktop: "your Blender", server: "server Blender", none: "not connected" }[status.kind] || status.kind;
    kind.className = "badge " + status.kind;
    kind.dataset.kind = status.kind;
    $("blender-version").textContent = status.blender_version ? "Blender " + status.blender_version : "";
    $("blender-note").textContent = status.note;
    // The person's own Blender is gone: using one of the server's is their choice.
    let choose = $("use-server-blender");
    if (status.server_blender_offered && !choose) {
      choose = document.createElement("button");
      choose.id = "use-server-blender";
      choose.type = "button";
      choose.textContent = "Use a server Blender";
      choose.addEventListener("click", () => { send({ type: "use_server_blender" }); });
      $("blender-note").after(choose);
    } else if (!status.server_blender_offered && choose) {
      choose.remove();
    }
    const tools = $("tools");
    tools.replaceChildren();
    for (const tool of status.tools) {
      const item = document.createElement("li");
      item.dataset.tool = tool.name;
      const name = document.createElement("span");
      name.className = "tool-name";
      name.textContent = tool.name;
      const params = document.createElement("span");
      params.textContent = "(" + tool.parameters.join(", ") + ")";
      const about = document.createElement("div");
      about.className = "muted";
      about.textContent = tool.addon + ": " + tool.description;
      item.append(name, params, about);
      tools.append(item);
    }
    if (!status.tools.length) {
      const item = document.createElement("li");
      item.className = "muted";
      item.textContent = status.kind === "none" ? "none until your Blender connects" : "listed once Blender has started";
      tools.append(item);
    }
    const problems = $("problems");
    problems.replaceChildren(...(status.problems || []).map((problem) => {
      const item = document.createElement("li");
      item.textContent = problem;
      return item;
    }));
  }

  // ------------------------------------------------------------------ requests

  function showRequestError(text) {
    const error = $("request-error");
    error.textContent = text || "";
    error.hidden = !text;
  }

  function newEntry(queryId, text) {
    const entry = document.createElement("li");
    entry.className = "entry";
    entry.dataset.query = queryId;
    const request = document.createElement("div");
    request.className = "request";
    request.textContent = text;
    const status = document.createElement("span");
    status.className = "request-state muted";
    status.textContent = "working…";
    request.append(status);
    const steps = document.createElement("ol");
    steps.className = "steps";
    entry.append(request, steps);
    $("log").append(entry);
    const parts = { entry, steps, status };
    state.entries.set(queryId, parts);
    return parts;
  }

  function setRunning(queryId) {
    state.running = queryId;
    $("send").disabled = queryId !== null;
    $("cancel").disabled = queryId === null;
  }

  function submitRequest(event) {
    event.preventDefault();
    const text = $("request").value.trim();
    if (!text || state.running) return;
    showRequestError("");
    const id = send({ type: "query", text });
    if (!id) return;
    newEntry(id, text);
    setRunning(id);
    pending.set(id, (response) => {
      if (!response.ok) {
        const parts = state.entries.get(id);
        if (parts) {
          parts.status.textContent = "refused";
          addLine(parts, "finished failed", response.error);
        }
        setRunning(null);
        return;
      }
      $("request").value = "";
    });
  }

  function cancelRequest() {
    const queryId = state.running;
    if (!queryId) return;
    const id = send({ type: "cancel", query_id: queryId });
    if (!id) return;
    $("cancel").disabled = true;
    const parts = state.entries.get(queryId);
    if (parts) parts.status.textContent = "cancelling…";
    pending.set(id, (response) => {
      if (response.ok && response.result.cancelled === false && state.running === queryId) {
        // The server does not carry it out (any more): nothing to wait for.
        if (parts) parts.status.textContent = "not running";
        setRunning(null);
      }
    });
  }

  function addLine(parts, className, text) {
    const line = document.createElement("li");
    line.className = className;
    line.textContent = text;
    parts.steps.append(line);
    line.scrollIntoView({ block: "nearest" });
    return line;
  }

  function entryFor(queryId, text) {
    return state.entries.get(queryId) || newEntry(queryId, text || "(a request from another page)");
  }

  // A call in words: its tool, then each argument as "name value".
  function callWords(tool, args) {
    if (!args || typeof args !== "object") return tool;
    const said = Object.entries(args).map(([name, value]) =>
      name.replace(/_/g, " ") + " " + (typeof value === "string" ? value : JSON.stringify(value)));
    const text = said.length ? tool.replace(/_/g, " ") + ": " + said.join(", ") : tool.replace(/_/g, " ");
    return text.length > 300 ? text.slice(0, 300) + "…" : text;
  }

  function shortJson(value) {
    const text = typeof value === "string" ? value : JSON.stringify(value);
    return text.length > 600 ? text.slice(0, 600) + "…" : text;
  }

  function showProgress(queryId, record) {
    const parts = entryFor(queryId);
    if (record.kind === "finished") {
      const stop = record.stop.reason;
      // A command sent that never answered (the server stopped meanwhile) says so.
      for (const sent of parts.steps.querySelectorAll(".tool-started")) {
        sent.textContent = sent.textContent.replace(/^running /, "sent to Blender, no answer came back: ").replace(/…$/, "");
        sent.classList.replace("tool-started", "tool-unanswered");
      }
      parts.status.textContent = { accepted: "done", max_iterations: "out of steps", time_limit: "out of time", generator_ended: "ended", cancelled: "cancelled", failed: "failed" }[stop] || stop;
      if (stop === "accepted") {
        const answer = document.createElement("div");
        answer.className = "answer";
        answer.textContent = record.message;
        parts.entry.append(answer);
      }
      const finished = addLine(parts, "finished " + stop, stop === "accepted" ? "finished" : record.message || stop);
      finished.dataset.stop = stop;
      if (state.running === queryId) setRunning(null);
      return;
    }
    if (record.kind !== "event") return;
    const event = record.event;
    // Lines recorded again after a reconnect are shown once.
    if (typeof event.seq === "number") {
      if (parts.lastSeq !== undefined && event.seq <= parts.lastSeq) return;
      parts.lastSeq = event.seq;
    }
    if (state.running === null && !parts.entry.querySelector(".finished")) setRunning(queryId);
    switch (event.type) {
      case "model_called":
        parts.status.textContent = "step " + event.index + "…";
        break;
      case "tool_started": {
        const line = addLine(parts, "tool-started muted", "running " + callWords(event.tool, event.arguments) + "…");
        line.dataset.tool = event.tool;
        break;
      }
      case "tool_invoked": {
        const started = parts.steps.querySelector(".tool-started[data-tool=\"" + CSS.escape(event.tool) + "\"]");
        if (started) started.remove();
        const line = addLine(parts, "tool-call" + (event.ok ? "" : " refused"), "");
        line.dataset.tool = event.tool;
        line.append(document.createTextNode((event.ok ? "✓ " : "✗ refused: ") + callWords(event.tool, event.arguments)));
        if (!event.ok && event.summary) {
          // Why it was refused, in view: not folded away.
          const why = document.createElement("span");
          why.className = "why";
          why.textContent = event.summary;
          line.append(why);
        }
        const details = document.createElement("details");
        const summary = document.createElement("summary");
        summary.textContent = "details";
        const body = document.createElement("pre");
        body.textContent = "arguments: " + shortJson(event.arguments || {}) +
          (event.result !== undefined ? "\nresult: " + shortJson(event.result) : "");
        details.append(summary, body);
        line.append(details);
        break;
      }
      case "warning":
        addLine(parts, "warning", event.message);
        break;
    }
  }

  function showView(view) {
    const parts = entryFor(view.query_id);
    const line = addLine(parts, "view", "");
    const image = document.createElement("img");
    image.alt = "the scene after step " + view.step;
    image.width = view.width;
    image.height = view.height;
    image.src = "data:image/png;base64," + view.png_base64;
    line.append(image);
  }

  // ------------------------------------------------------------------ start

  document.addEventListener("DOMContentLoaded", () => {
    $("login-form").addEventListener("submit", (event) => {
      event.preventDefault();
      state.username = $("username").value.trim();
      state.token = $("token").value;
      $("token").value = "";
      $("login-error").hidden = true;
      if (state.socket) state.socket.close();
      connect();
    });
    $("request-form").addEventListener("submit", submitRequest);
    $("request").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) submitRequest(event);
    });
    $("cancel").addEventListener("click", cancelRequest);
  });
})();
