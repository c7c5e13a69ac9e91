// The JS SDK as a jobs app. @dapr/dapr 3.x has no job handler: its DaprServer's gRPC server
// answers AppCallbackAlpha.OnJobEventAlpha1 with an empty response and drops the event. So the
// job events are served with the SDK's own generated stubs (AppCallbackAlpha from
// @dapr/dapr/proto, on the connect-node runtime the SDK itself uses); jobs named fail-* answer an
// error so that the sidecar reports FAILED. Every event is recorded (common.js).
"use strict";
const http2 = require("http2");
const { connectNodeAdapter } = require("@connectrpc/connect-node");
const { ConnectError, Code } = require("@connectrpc/connect");
const { create } = require("@bufbuild/protobuf");
const { AppCallbackAlpha, JobEventResponseSchema } = require("@dapr/dapr/proto/dapr/proto/runtime/v1/appcallback_pb");
const { record } = require("./common");

const handler = connectNodeAdapter({
  routes(router) {
    router.service(AppCallbackAlpha, {
      async onJobEventAlpha1(req) {
        const data = req.data ? Buffer.from(req.data.value) : Buffer.alloc(0);
        record("job", { name: req.name, data_b64: data.toString("base64"), method: req.method });
        if (req.name.startsWith("fail-")) throw new ConnectError(`failing on purpose: ${req.name}`, Code.Internal);
        return create(JobEventResponseSchema, {});
      },
    });
  },
});

const port = Number(process.env.SDKM_PORT);
http2.createServer(handler).listen(port, "127.0.0.1", () => console.log(`js jobs app (AppCallbackAlpha stubs) on 127.0.0.1:${port}`));
