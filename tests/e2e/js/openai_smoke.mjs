// Smoke test of the official `openai` npm package against a live radixserve.
// Usage: node openai_smoke.mjs <base_url>   (RADIX_NPM: the npm prefix holding node_modules)
// Prints one JSON object with what each call returned; the pytest side asserts on it.
import { createRequire } from "node:module";
import path from "node:path";

const prefix = process.env.RADIX_NPM;
if (!prefix) throw new Error("RADIX_NPM is not set");
const require = createRequire(path.join(prefix, "node_modules", "noop.js"));
const mod = require("openai");
const OpenAI = mod.OpenAI ?? mod.default ?? mod;

const client = new OpenAI({ baseURL: process.argv[2] + "/v1", apiKey: "sk-test", maxRetries: 0 });
const messages = [{ role: "user", content: "Name a color." }];
const out = {};

const chat = await client.chat.completions.create({
  model: "default", messages, max_tokens: 12, temperature: 0,
});
out.chat = {
  object: chat.object, id: chat.id, role: chat.choices[0].message.role,
  content: chat.choices[0].message.content, finish_reason: chat.choices[0].finish_reason,
  usage: chat.usage,
};

const stream = await client.chat.completions.create({
  model: "default", messages, max_tokens: 12, temperature: 0, stream: true,
  stream_options: { include_usage: true },
});
const chunks = [];
let streamed = "";
let usage = null;
for await (const chunk of stream) {
  chunks.push(chunk.object);
  if (chunk.usage) usage = chunk.usage;
  for (const choice of chunk.choices) streamed += choice.delta?.content ?? "";
}
out.stream = { objects: [...new Set(chunks)], count: chunks.length, content: streamed, usage };

const completion = await client.completions.create({
  model: "default", prompt: "The sky is", max_tokens: 8, temperature: 0,
});
out.completion = {
  object: completion.object, text: completion.choices[0].text,
  finish_reason: completion.choices[0].finish_reason, usage: completion.usage,
};

const models = [];
for await (const model of client.models.list()) models.push({ id: model.id, object: model.object });
out.models = models;
out.model = await client.models.retrieve(models[0].id);

console.log(JSON.stringify(out));
