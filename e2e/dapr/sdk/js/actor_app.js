// The JS SDK as an actor app: DaprServer (HTTP) hosting JsSdkActor, an AbstractActor whose
// methods register and unregister its reminder and timer with the SDK's own calls
// (registerActorReminder, registerActorTimer, …), and whose state goes through the SDK's actor
// state manager (getStateManager(); the SDK also saves it after every method). Every call, tick
// and timer is recorded.
"use strict";
const { DaprServer, AbstractActor, CommunicationProtocolEnum, Temporal } = require("@dapr/dapr");
const { record } = require("./common");

const second = Temporal.Duration.from({ seconds: 1 });

class JsSdkActor extends AbstractActor {
  async ping(arg) {
    record("method", { actor: this.getActorId().getId(), name: "ping", text: arg });
    return "pong:" + arg;
  }
  async armReminder(arg) {
    await this.registerActorReminder(arg.name, second, second, undefined, arg.data);
  }
  async disarmReminder(name) {
    await this.unregisterActorReminder(name);
  }
  async armTimer(arg) {
    await this.registerActorTimer(arg.name, "onTimer", second, second, undefined, arg.data);
  }
  async disarmTimer(name) {
    await this.unregisterActorTimer(name);
  }
  // Actor state, as a JS user keeps it: the state manager's cache, saved explicitly
  // (saveState) or by the SDK after the method.
  async setCount(n) {
    await this.getStateManager().setState("count", n);
    await this.getStateManager().saveState();
    return n;
  }
  async getCount() {
    const [has, n] = await this.getStateManager().tryGetState("count");
    return has ? n : -1;
  }
  async removeCount() {
    return await this.getStateManager().tryRemoveState("count"); // saved after the method
  }
  async getSeeded() {
    const [has, v] = await this.getStateManager().tryGetState("seeded");
    return has ? v : {};
  }
  async onTimer(state) {
    record("timer", { actor: this.getActorId().getId(), name: "onTimer", text: state });
  }
  async receiveReminder(state) {
    record("reminder", { actor: this.getActorId().getId(), name: "r1", text: state });
  }
}

async function main() {
  const server = new DaprServer({
    serverHost: "127.0.0.1",
    serverPort: process.env.SDKM_PORT,
    communicationProtocol: CommunicationProtocolEnum.HTTP,
    clientOptions: { daprHost: "127.0.0.1", daprPort: process.env.DAPR_HTTP_PORT },
  });
  await server.actor.init();
  server.actor.registerActor(JsSdkActor);
  await server.start();
  console.log(`js actor app (DaprServer) on 127.0.0.1:${process.env.SDKM_PORT}`);
}

if (require.main === module) {
  main().catch((e) => {
    console.error(e);
    process.exit(1);
  });
}

module.exports = { JsSdkActor };
