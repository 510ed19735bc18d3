// radixserve chat page: streams /v1/chat/completions over fetch + ReadableStream, renders the
// answer as markdown (markdown.js), stops a generation by aborting the fetch and calling
// /abort_request with the request's rid, and asks for the API key when the server answers 401.
//
// Storage: settings in localStorage, the API key in sessionStorage (this tab only).
"use strict";

(() => {
  const KEY_STORAGE = "radixserve.apiKey";
  const SETTINGS_STORAGE = "radixserve.settings";
  const $ = (id) => document.getElementById(id);

  const ui = {
    messages: $("messages"), hint: $("empty-hint"), composer: $("composer"), prompt: $("prompt"),
    send: $("send"), stop: $("stop"), newChat: $("new-chat"), settings: $("settings"),
    settingsToggle: $("settings-toggle"), model: $("model-select"), modelName: $("model-name"),
    system: $("system-prompt"), temperature: $("temperature"),
    temperatureValue: $("temperature-value"), maxTokens: $("max-tokens"),
    forgetKey: $("forget-key"), keyDialog: $("key-dialog"), keyForm: $("key-form"),
    keyInput: $("key-input"), keyError: $("key-error"), keyCancel: $("key-cancel"),
  };

  const state = {
    history: [],         // [{role, content}] of finished turns
    current: null,       // the generation in flight: {rid, controller, stopped}
    cacheReport: false,  // the server runs with --enable-cache-report
    keyPrompt: null,     // pending promise of the API-key dialog, shared by concurrent calls
  };

  // ---- API key ------------------------------------------------------------------------------

  function authHeaders() {
    const key = sessionStorage.getItem(KEY_STORAGE);
    return key ? { Authorization: `Bearer ${key}` } : {};
  }

  function askForKey(rejected) {
    if (state.keyPrompt) return state.keyPrompt;
    state.keyPrompt = new Promise((resolve) => {
      const finish = (value) => {
        ui.keyForm.removeEventListener("submit", onSubmit);
        ui.keyCancel.removeEventListener("click", onCancel);
        ui.keyDialog.removeEventListener("cancel", onCancel);
        if (ui.keyDialog.open) ui.keyDialog.close();
        state.keyPrompt = null;
        resolve(value);
      };
      const onSubmit = (event) => {
        event.preventDefault();
        const key = ui.keyInput.value.trim();
        if (key) finish(key);
      };
      const onCancel = (event) => {
        event.preventDefault();
        finish(null);
      };
      ui.keyForm.addEventListener("submit", onSubmit);
      ui.keyCancel.addEventListener("click", onCancel);
      ui.keyDialog.addEventListener("cancel", onCancel);
      ui.keyError.hidden = !rejected;
      ui.keyInput.value = "";
      ui.keyDialog.showModal();
      ui.keyInput.focus();
    });
    return state.keyPrompt;
  }

  // fetch() with the stored key. On 401 asks for a key and retries until the server accepts it
  // or the user cancels (then the 401 response is returned).
  async function apiFetch(path, init = {}) {
    let rejected = sessionStorage.getItem(KEY_STORAGE) !== null;
    for (;;) {
      const response =
          await fetch(path, { ...init, headers: { ...(init.headers || {}), ...authHeaders() } });
      if (response.status !== 401) {
        ui.forgetKey.hidden = sessionStorage.getItem(KEY_STORAGE) === null;
        return response;
      }
      const key = await askForKey(rejected);
      if (key === null) return response;
      sessionStorage.setItem(KEY_STORAGE, key);
      rejected = true;
    }
  }

  async function errorMessage(response) {
    const text = await response.text();
    try {
      const body = JSON.parse(text);
      const message = body.message || (body.error && (body.error.message || body.error));
      if (message) return `${response.status}: ${message}`;
    } catch (_) {
      // not JSON: fall through to the raw text
    }
    return `${response.status}: ${text || response.statusText}`;
  }

  // ---- settings -----------------------------------------------------------------------------

  function loadSettings() {
    let saved = {};
    try {
      saved = JSON.parse(localStorage.getItem(SETTINGS_STORAGE) || "{}");
    } catch (_) {
      saved = {};
    }
    if (typeof saved.system === "string") ui.system.value = saved.system;
    if (saved.temperature !== undefined) ui.temperature.value = saved.temperature;
    if (saved.maxTokens !== undefined) ui.maxTokens.value = saved.maxTokens;
    ui.temperatureValue.textContent = Number(ui.temperature.value).toFixed(2);
    return saved;
  }

  function saveSettings() {
    ui.temperatureValue.textContent = Number(ui.temperature.value).toFixed(2);
    localStorage.setItem(SETTINGS_STORAGE, JSON.stringify({
      system: ui.system.value, temperature: ui.temperature.value,
      maxTokens: ui.maxTokens.value, model: ui.model.value,
    }));
  }

  // The header shows the last path component of the model id (often a file path); the full id
  // is its tooltip.
  function showModelName() {
    const id = ui.model.value;
    ui.modelName.textContent = id.split("/").filter(Boolean).pop() || id;
    ui.modelName.title = id;
  }

  async function loadModels(preferred) {
    try {
      const response = await apiFetch("/v1/models");
      if (!response.ok) throw new Error(await errorMessage(response));
      const models = (await response.json()).data || [];
      ui.model.replaceChildren(...models.map((m) => new Option(m.id, m.id)));
      if (models.some((m) => m.id === preferred)) ui.model.value = preferred;
      showModelName();
    } catch (err) {
      ui.modelName.textContent = `models unavailable (${err.message})`;
    }
  }

  async function loadServerInfo() {
    try {
      const response = await fetch("/server_info", { headers: authHeaders() });
      if (response.ok) state.cacheReport = Boolean((await response.json()).enable_cache_report);
    } catch (_) {
      state.cacheReport = false;
    }
  }

  // ---- conversation view --------------------------------------------------------------------

  function nearBottom() {
    const m = ui.messages;
    return m.scrollHeight - m.scrollTop - m.clientHeight < 80;
  }

  function addMessage(role) {
    ui.hint.hidden = true;
    const el = document.createElement("div");
    el.className = `message ${role}`;
    const content = document.createElement("div");
    content.className = "content";
    el.append(content);
    ui.messages.append(el);
    ui.messages.scrollTop = ui.messages.scrollHeight;
    return el;
  }

  function setBusy(busy) {
    ui.send.hidden = busy;
    ui.stop.hidden = !busy;
    ui.send.disabled = busy;
  }

  function randomRid() {
    const bytes = new Uint8Array(12);
    crypto.getRandomValues(bytes);  // works on plain http too, unlike crypto.randomUUID
    return "web-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  function describeStats(stats) {
    const parts = [`${stats.tokens} tokens`];
    if (stats.tokensPerSecond !== null) parts.push(`${stats.tokensPerSecond.toFixed(1)} tok/s`);
    if (stats.ttftMs !== null) parts.push(`first token ${Math.round(stats.ttftMs)} ms`);
    if (stats.cached !== null) parts.push(`${stats.cached} cached`);
    if (stats.finish) parts.push(stats.finish);
    return parts.join(" \u00b7 ");
  }

  // ---- streaming ----------------------------------------------------------------------------

  // Reads an SSE body and calls onData with each event's data field.
  async function readEvents(body, onData) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let data = [];
    for (;;) {
      const { value, done } = await reader.read();
      buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
      const lines = buffer.split(/\r?\n/);
      buffer = done ? "" : lines.pop();
      for (const line of lines) {
        if (line === "") {
          if (data.length > 0 && onData(data.join("\n")) === false) return;
          data = [];
        } else if (line.startsWith("data:")) {
          data.push(line.slice(line[5] === " " ? 6 : 5));
        }
      }
      if (done) {
        if (data.length > 0) onData(data.join("\n"));
        return;
      }
    }
  }

  async function send(text) {
    if (state.current || !text.trim()) return;
    saveSettings();
    const userEl = addMessage("user");
    userEl.querySelector(".content").textContent = text;
    const turn = { role: "user", content: text };
    const history = state.history;  // "New chat" replaces state.history; this turn stays here
    history.push(turn);

    const answerEl = addMessage("assistant");
    answerEl.classList.add("streaming");
    const contentEl = answerEl.querySelector(".content");
    const statsEl = document.createElement("div");
    statsEl.className = "stats";
    answerEl.append(statsEl);

    const messages = [];
    if (ui.system.value.trim()) messages.push({ role: "system", content: ui.system.value });
    messages.push(...history);
    const rid = randomRid();
    answerEl.dataset.rid = rid;
    const current = { rid, controller: new AbortController(), stopped: false };
    state.current = current;
    setBusy(true);

    const started = performance.now();
    let firstToken = null;
    let answer = "";
    let chunks = 0;
    let usage = null;
    let finish = null;
    let error = null;
    let renderQueued = false;
    const render = () => {
      renderQueued = false;
      const follow = nearBottom();
      contentEl.innerHTML = RadixMarkdown.render(answer);
      if (follow) ui.messages.scrollTop = ui.messages.scrollHeight;
    };

    try {
      const temperature = Number(ui.temperature.value);
      const maxTokens = Math.max(1, Math.floor(Number(ui.maxTokens.value) || 1));
      const response = await apiFetch("/v1/chat/completions", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({
          model: ui.model.value || undefined, messages, stream: true,
          stream_options: { include_usage: true }, temperature, max_tokens: maxTokens, rid,
        }),
        signal: current.controller.signal,
      });
      if (!response.ok) throw new Error(await errorMessage(response));
      await readEvents(response.body, (data) => {
        if (data === "[DONE]") return false;
        const event = JSON.parse(data);
        if (event.error) {
          error = event.error.message || JSON.stringify(event.error);
          return false;
        }
        if (event.usage) usage = event.usage;
        const choice = (event.choices || [])[0];
        if (choice) {
          const delta = choice.delta && choice.delta.content;
          if (delta) {
            if (firstToken === null) firstToken = performance.now();
            answer += delta;
            chunks++;
            answerEl.dataset.chunks = String(chunks);
            if (!renderQueued) {
              renderQueued = true;
              requestAnimationFrame(render);
            }
          }
          if (choice.finish_reason) finish = choice.finish_reason;
        }
        return true;
      });
    } catch (err) {
      if (!current.stopped) error = err.message || String(err);
    }

    const ended = performance.now();
    render();
    answerEl.classList.remove("streaming");
    if (error) {
      const errorEl = document.createElement("div");
      errorEl.className = "error";
      errorEl.textContent = error;
      answerEl.insertBefore(errorEl, statsEl);
    }
    const tokens = usage ? usage.completion_tokens : chunks;
    let tokensPerSecond = null;
    if (firstToken !== null && tokens > 1 && ended > firstToken) {
      tokensPerSecond = (tokens - 1) / ((ended - firstToken) / 1000);  // decode speed
    } else if (tokens > 0 && ended > started) {
      tokensPerSecond = tokens / ((ended - started) / 1000);
    }
    const details = usage && usage.prompt_tokens_details;
    let cached = null;
    if (details && details.cached_tokens !== undefined) {
      cached = details.cached_tokens;
    } else if (usage && state.cacheReport) {
      cached = 0;  // the server reports cached tokens only when there are some
    }
    const stats = {
      tokens, tokensPerSecond, cached, ttftMs: firstToken === null ? null : firstToken - started,
      finish: current.stopped ? "stopped" : finish,
    };
    statsEl.textContent = describeStats(stats);
    statsEl.dataset.tokens = String(tokens);
    if (cached !== null) statsEl.dataset.cached = String(cached);
    answerEl.dataset.finish = stats.finish || (error ? "error" : "");
    answerEl.dataset.done = "true";

    if (answer) {
      history.push({ role: "assistant", content: answer });
    } else {
      history.splice(history.indexOf(turn), 1);  // keep user/assistant alternating
    }
    state.current = null;
    setBusy(false);
    ui.prompt.focus();
  }

  // Stops the generation in flight: the fetch is aborted (the server also notices the closed
  // connection) and /abort_request releases the request at once.
  function stop() {
    const current = state.current;
    if (!current || current.stopped) return;
    current.stopped = true;
    current.controller.abort();
    fetch("/abort_request", {
      method: "POST",
      headers: { "Content-Type": "application/json", ...authHeaders() },
      body: JSON.stringify({ rid: current.rid }),
    }).catch(() => {});
  }

  // ---- wiring -------------------------------------------------------------------------------

  ui.composer.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = ui.prompt.value;
    if (!text.trim() || state.current) return;
    ui.prompt.value = "";
    send(text);
  });
  ui.prompt.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      ui.composer.requestSubmit();
    }
  });
  ui.stop.addEventListener("click", stop);
  ui.newChat.addEventListener("click", () => {
    stop();
    state.history = [];
    ui.messages.replaceChildren(ui.hint);
    ui.hint.hidden = false;
  });
  ui.settingsToggle.addEventListener("click", () => {
    ui.settings.hidden = !ui.settings.hidden;
    ui.settingsToggle.setAttribute("aria-expanded", String(!ui.settings.hidden));
  });
  for (const input of [ui.system, ui.temperature, ui.maxTokens]) {
    input.addEventListener("input", saveSettings);
  }
  ui.model.addEventListener("change", () => {
    showModelName();
    saveSettings();
  });
  ui.forgetKey.addEventListener("click", () => {
    sessionStorage.removeItem(KEY_STORAGE);
    ui.forgetKey.hidden = true;
  });

  const saved = loadSettings();
  loadModels(saved.model).then(loadServerInfo);
  ui.prompt.focus();
})();
