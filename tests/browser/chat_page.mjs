// Drives radixserve's chat page in headless Chromium through playwright-core and prints one JSON
// object with what it saw; tests/browser/test_chat_page.py runs it and asserts on the result.
//
//   node chat_page.mjs --url http://127.0.0.1:PORT --scenario chat|apikey
//                      [--api-key KEY] [--screenshot FILE]
//
// Scenarios:
//   chat    send a short question and record the answer's text length at every DOM change (it
//           must grow while the answer streams); then ask for a long answer (the request gets
//           ignore_eos added on the wire so it cannot end by itself), press Stop mid-answer,
//           then ask a follow-up whose prompt shares the conversation's prefix. Every POST the
//           page makes is recorded.
//   apikey  the server runs with --api-key: the page asks for the key; a wrong key is refused,
//           the right one is used as a Bearer token and the chat works.
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";

const NPM_PREFIX = process.env.RADIX_NPM || path.join(os.homedir(), ".cache/radixserve/npm");
const require = createRequire(path.join(NPM_PREFIX, "node_modules", "_"));
const { chromium } = require("playwright-core");

function parseArgs(argv) {
  const args = {};
  for (let i = 0; i < argv.length; i += 2) args[argv[i].replace(/^--/, "")] = argv[i + 1];
  return args;
}

const args = parseArgs(process.argv.slice(2));
const TIMEOUT_MS = 120_000;  // generous: the machine may be busy; nothing here asserts on time

// Installs a MutationObserver on the newest assistant answer that records its text length at
// every change, and whether the answer was still streaming at that moment.
async function watchNextAnswer(page) {
  await page.evaluate(() => {
    window.__growth = [];
    const messages = document.getElementById("messages");
    const before = messages.querySelectorAll(".message.assistant").length;
    const observer = new MutationObserver(() => {
      const answers = messages.querySelectorAll(".message.assistant");
      if (answers.length <= before) return;
      const answer = answers[answers.length - 1];
      const length = answer.querySelector(".content").textContent.length;
      const growth = window.__growth;
      if (growth.length === 0 || growth[growth.length - 1].length !== length) {
        growth.push({ length, streaming: answer.classList.contains("streaming") });
      }
    });
    observer.observe(messages, { childList: true, subtree: true, characterData: true });
  });
}

async function lastAnswer(page) {
  return page.evaluate(() => {
    const answers = document.querySelectorAll(".message.assistant");
    const answer = answers[answers.length - 1];
    const stats = answer.querySelector(".stats");
    const error = answer.querySelector(".error");
    return {
      text: answer.querySelector(".content").textContent,
      html: answer.querySelector(".content").innerHTML,
      rid: answer.dataset.rid,
      chunks: Number(answer.dataset.chunks || 0),
      finish: answer.dataset.finish,
      stats: stats.textContent,
      tokens: stats.dataset.tokens === undefined ? null : Number(stats.dataset.tokens),
      cached: stats.dataset.cached === undefined ? null : Number(stats.dataset.cached),
      error: error ? error.textContent : null,
      growth: window.__growth,
    };
  });
}

async function setSettings(page, { maxTokens, temperature, system }) {
  if (await page.isHidden("#settings")) await page.click("#settings-toggle");
  if (maxTokens !== undefined) await page.fill("#max-tokens", String(maxTokens));
  if (temperature !== undefined) {
    await page.$eval("#temperature", (el, value) => {
      el.value = value;
      el.dispatchEvent(new Event("input"));
    }, String(temperature));
  }
  if (system !== undefined) await page.fill("#system-prompt", system);
}

async function ask(page, text) {
  await page.fill("#prompt", text);
  await page.press("#prompt", "Enter");
}

async function waitDone(page, count) {
  await page.waitForFunction(
      (n) => document.querySelectorAll('.message.assistant[data-done="true"]').length >= n, count,
      { timeout: TIMEOUT_MS });
}

async function chatScenario(page, result) {
  await page.goto(args.url + "/");
  await page.waitForFunction(() => document.getElementById("model-name").textContent !== "",
                             null, { timeout: TIMEOUT_MS });
  result.modelName = await page.textContent("#model-name");
  result.modelTitle = await page.getAttribute("#model-name", "title");
  result.modelOptions =
      await page.$$eval("#model-select option", (opts) => opts.map((o) => o.value));
  result.markdownXss = await page.evaluate(() => RadixMarkdown.render(
      '<img src=x onerror="window.__pwned=1"> [a](javascript:alert(1))'));

  // 1. A short answer streams in.
  await setSettings(page,
                    { maxTokens: 48, temperature: 0, system: "You are a concise assistant." });
  await watchNextAnswer(page);
  await ask(page, "What is the capital of France? Answer in one sentence.");
  await waitDone(page, 1);
  result.first = await lastAnswer(page);

  // 2. A long answer, stopped mid-stream. ignore_eos is added on the wire so the answer can only
  //    end by max_tokens or by the Stop button.
  await page.route("**/v1/chat/completions", async (route) => {
    const body = JSON.parse(route.request().postData());
    body.ignore_eos = true;
    await route.continue({ postData: JSON.stringify(body) });
  });
  await setSettings(page, { maxTokens: 4000, temperature: 0.7 });
  await watchNextAnswer(page);
  await ask(page, "Write a very long story about a lighthouse keeper, with many chapters.");
  await page.waitForFunction(() => {
    const answers = document.querySelectorAll(".message.assistant");
    return answers.length === 2 && Number(answers[1].dataset.chunks || 0) >= 8;
  }, null, { timeout: TIMEOUT_MS });
  result.stopVisibleWhileStreaming = await page.isVisible("#stop");
  result.chunksAtStop = await page.evaluate(
      () => Number(document.querySelectorAll(".message.assistant")[1].dataset.chunks));
  await page.click("#stop");
  await waitDone(page, 2);
  result.stopped = await lastAnswer(page);
  result.sendVisibleAfterStop = await page.isVisible("#send");

  // 3. The conversation goes on after a stop; its shared prefix comes from the radix cache.
  await page.unroute("**/v1/chat/completions");
  await setSettings(page, { maxTokens: 16, temperature: 0 });
  await watchNextAnswer(page);
  await ask(page, "Thanks! Now give the story a title.");
  await waitDone(page, 3);
  result.third = await lastAnswer(page);
}

async function apiKeyScenario(page, result) {
  const pageResponse = await page.goto(args.url + "/");
  result.pageStatus = pageResponse.status();
  await page.waitForSelector("#key-dialog[open]", { timeout: TIMEOUT_MS });
  result.dialogShown = true;
  await page.fill("#key-input", "wrong-" + args["api-key"]);
  await page.click("#key-submit");
  // The wrong key gets 401 again: the dialog comes back with its error line.
  await page.waitForFunction(() => document.getElementById("key-dialog").open &&
                                 !document.getElementById("key-error").hidden,
                             null, { timeout: TIMEOUT_MS });
  result.wrongKeyRejected = true;
  await page.fill("#key-input", args["api-key"]);
  await page.click("#key-submit");
  await page.waitForFunction(() => !document.getElementById("key-dialog").open &&
                                 document.getElementById("model-name").textContent !== "",
                             null, { timeout: TIMEOUT_MS });
  result.modelName = await page.textContent("#model-name");
  await setSettings(page, { maxTokens: 24, temperature: 0 });
  await watchNextAnswer(page);
  await ask(page, "Say hello.");
  await waitDone(page, 1);
  result.first = await lastAnswer(page);
  result.storedKey = await page.evaluate(() => sessionStorage.getItem("radixserve.apiKey"));
}

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.RADIX_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    // Root in a container has no user namespaces for Chromium's sandbox.
    args: ["--no-sandbox", "--disable-dev-shm-usage"],
  });
  const result = { scenario: args.scenario, consoleErrors: [], pageErrors: [], requests: [] };
  try {
    const context = await browser.newContext({ viewport: { width: 1100, height: 820 } });
    const page = await context.newPage();
    page.on("console", (msg) => {
      if (msg.type() === "error") result.consoleErrors.push(msg.text());
    });
    page.on("pageerror", (err) => result.pageErrors.push(String(err)));
    page.on("request", (request) => {
      const url = new URL(request.url());
      if (request.method() !== "POST") return;
      result.requests.push({
        path: url.pathname,
        body: request.postData(),
        authorization: request.headers()["authorization"] || null,
      });
    });
    if (args.scenario === "chat") {
      await chatScenario(page, result);
    } else if (args.scenario === "apikey") {
      await apiKeyScenario(page, result);
    } else {
      throw new Error(`unknown scenario ${args.scenario}`);
    }
    result.pwned = await page.evaluate(() => window.__pwned === 1);
    if (args.screenshot) {
      await page.screenshot({ path: args.screenshot, fullPage: true });
      result.screenshot = args.screenshot;
    }
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(result) + "\n");
}

main().catch((err) => {
  process.stderr.write(`${err.stack || err}\n`);
  process.exit(1);
});
