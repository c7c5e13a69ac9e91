package sdkmatrix;

import io.dapr.v1.AppCallbackAlphaGrpc;
import io.dapr.v1.DaprAppCallbackProtos.JobEventRequest;
import io.dapr.v1.DaprAppCallbackProtos.JobEventResponse;
import io.grpc.Server;
import io.grpc.Status;
import io.grpc.netty.NettyServerBuilder;
import io.grpc.stub.StreamObserver;
import java.net.InetSocketAddress;
import java.util.Base64;

/**
 * The Java SDK as a jobs app. io.dapr:dapr-sdk has no job handler, so the job events are served
 * with the SDK's own generated stubs (dapr-sdk-autogen's AppCallbackAlphaGrpc) on grpc-netty, which
 * the SDK brings. Jobs named fail-* answer an error so that the sidecar reports FAILED.
 */
public final class JobsApp extends AppCallbackAlphaGrpc.AppCallbackAlphaImplBase {
  @Override
  public void onJobEventAlpha1(JobEventRequest req, StreamObserver<JobEventResponse> resp) {
    var f = Events.fields();
    f.put("name", req.getName());
    f.put("data_b64", Base64.getEncoder().encodeToString(req.getData().getValue().toByteArray()));
    Events.record("job", f);
    if (req.getName().startsWith("fail-")) {
      resp.onError(Status.INTERNAL.withDescription("failing on purpose: " + req.getName()).asRuntimeException());
      return;
    }
    resp.onNext(JobEventResponse.getDefaultInstance());
    resp.onCompleted();
  }

  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(System.getenv("SDKM_PORT"));
    Server server = NettyServerBuilder.forAddress(new InetSocketAddress("127.0.0.1", port))
        .addService(new JobsApp()).build().start();
    System.out.println("java jobs app (AppCallbackAlpha stubs) on 127.0.0.1:" + port);
    server.awaitTermination();
  }
}
