// The JS SDK first-call check of issue 36: a Dapr JS SDK actor app (DaprServer +
// AbstractActor + ActorProxyBuilder), started next to its sidecar the way `dapr run` starts
// daprd and an app (sidecar first, the app right after, no sleeps), whose FIRST actor call
// must succeed. daprd's /v1.0/healthz (and so the SDK's wait for the sidecar) is not ready until
// the app's port is open and /dapr/config has been read; a sidecar that reports ready earlier
// answers this first call with ERR_ACTOR_INVOKE_METHOD "did not find address for actor".
//
// Prints one `RESULT<TAB>js.first_call<TAB>pass|fail<TAB>note` line; exits 0 on pass.
"use strict";
const { DaprServer, DaprClient, AbstractActor, ActorProxyBuilder, ActorId, CommunicationProtocolEnum } = require("@dapr/dapr");

class CounterActor extends AbstractActor {
  async increment() {
    this.count = (this.count || 0) + 1;
    return this.count;
  }
}

async function main() {
  const t0 = Date.now();
  const opts = { daprHost: "127.0.0.1", daprPort: process.env.DAPR_HTTP_PORT };
  const server = new DaprServer({
    serverHost: "127.0.0.1",
    serverPort: process.env.SDKM_PORT,
    communicationProtocol: CommunicationProtocolEnum.HTTP,
    clientOptions: opts,
  });
  await server.actor.init();
  server.actor.registerActor(CounterActor);
  await server.start(); // returns once the SDK sees the sidecar started
  const client = new DaprClient({ ...opts, communicationProtocol: CommunicationProtocolEnum.HTTP });
  const counter = new ActorProxyBuilder(CounterActor, client).build(new ActorId("a1"));
  const started = ((Date.now() - t0) / 1000).toFixed(2);
  let verdict;
  try {
    const n = await counter.increment();
    verdict = ["pass", `first call CounterActor/a1.increment() -> ${n}, ${started} s after the app started`];
  } catch (e) {
    const first = String(e && e.message ? e.message : e).replace(/\s+/g, " ");
    // How long until a call goes through, for the report.
    let later = "no call succeeded within 15 s";
    const t1 = Date.now();
    while (Date.now() - t1 < 15000) {
      try {
        await counter.increment();
        later = `a call succeeded ${((Date.now() - t1) / 1000).toFixed(2)} s later`;
        break;
      } catch {
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    verdict = ["fail", `first call (${started} s after the app started) failed: ${first}; ${later}`];
  }
  console.log(`RESULT\tjs.first_call\t${verdict[0]}\t${verdict[1]}`);
  process.exit(verdict[0] === "pass" ? 0 : 1);
}

main().catch((e) => {
  console.log(`RESULT\tjs.first_call\tfail\tthe app failed before its first call: ${String(e).replace(/\s+/g, " ")}`);
  process.exit(1);
});
