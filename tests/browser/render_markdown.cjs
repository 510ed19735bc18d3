// Reads a JSON array of markdown strings on stdin and prints the chat page's rendering of each
// (src/web/static/markdown.js) as a JSON array, for test_markdown.py.
"use strict";
const path = require("node:path");
const markdown = require(path.join(__dirname, "../../src/web/static/markdown.js"));

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", () => {
  process.stdout.write(JSON.stringify(JSON.parse(input).map((text) => markdown.render(text))));
});
