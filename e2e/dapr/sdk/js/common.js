// Shared by the JS SDK side of the jobsd SDK matrix (e2e/dapr/sdk.sh): the events file the apps
// write (one JSON object a line, synced before the SDK answers) and the client reads, and the
// RESULT lines the client prints. Environment as in e2e/dapr/sdk/python/common.py.
"use strict";
const fs = require("fs");

let fd = null;
function record(kind, fields) {
  if (fd === null) fd = fs.openSync(process.env.SDKM_EVENTS, "a");
  fs.writeSync(fd, JSON.stringify({ t: Date.now() / 1000, kind, ...fields }) + "\n");
  fs.fsyncSync(fd);
}

function readEvents(path, keep) {
  let text = "";
  try {
    text = fs.readFileSync(path, "utf8");
  } catch {
    return [];
  }
  return text.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l)).filter(keep);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitEvents(path, n, timeoutS, keep) {
  const deadline = Date.now() + timeoutS * 1000;
  for (;;) {
    const got = readEvents(path, keep);
    if (got.length >= n || Date.now() > deadline) return got;
    await sleep(100);
  }
}

async function quiet(path, seconds, keep) {
  const before = readEvents(path, keep).length;
  await sleep(seconds * 1000);
  return readEvents(path, keep).length - before;
}

class Results {
  constructor() {
    this.failed = 0;
  }
  emit(feature, status, note) {
    if (status === "fail") this.failed++;
    console.log(`RESULT\t${feature}\t${status}\t${String(note).replace(/\s+/g, " ")}`);
  }
  // fn resolves to the note of a pass, or throws (a fail).
  async run(feature, fn) {
    try {
      this.emit(feature, "pass", await fn());
      return true;
    } catch (e) {
      this.emit(feature, "fail", e && e.stack ? String(e.message || e) : String(e));
      return false;
    }
  }
}

function assert(cond, msg) {
  if (!cond) throw new Error(typeof msg === "function" ? msg() : msg);
}

module.exports = { record, readEvents, waitEvents, quiet, sleep, Results, assert };
