package sdkmatrix;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.dapr.actors.runtime.ActorRuntime;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.concurrent.Executors;

/**
 * The Java SDK as an actor app: dapr-sdk-actors' ActorRuntime hosting JavaSdkActor, behind the
 * app routes daprd calls (the ones dapr-sdk-springboot's DaprController maps onto ActorRuntime:
 * GET /dapr/config, PUT /actors/{type}/{id}/method/{m}, …/method/remind/{name},
 * …/method/timer/{name}, DELETE /actors/{type}/{id}), served by the JDK's HttpServer instead of
 * Spring Boot.
 */
public final class ActorApp {
  public static void main(String[] args) throws Exception {
    ActorRuntime runtime = ActorRuntime.getInstance();
    runtime.registerActor(JavaSdkActorImpl.class);
    int port = Integer.parseInt(System.getenv("SDKM_PORT"));
    HttpServer http = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 64);
    http.setExecutor(Executors.newFixedThreadPool(16));
    http.createContext("/", ex -> {
      try {
        handle(runtime, ex);
      } catch (Exception e) {
        byte[] body = String.valueOf(e).getBytes();
        ex.sendResponseHeaders(500, body.length);
        ex.getResponseBody().write(body);
      } finally {
        ex.close();
      }
    });
    http.start();
    System.out.println("java actor app (ActorRuntime) on 127.0.0.1:" + port);
  }

  private static void handle(ActorRuntime rt, HttpExchange ex) throws IOException {
    String method = ex.getRequestMethod();
    String[] p = ex.getRequestURI().getPath().substring(1).split("/");
    byte[] body = ex.getRequestBody().readAllBytes();
    byte[] out = new byte[0];
    if (method.equals("GET") && p.length == 2 && p[0].equals("dapr") && p[1].equals("config")) {
      out = rt.serializeConfig();
    } else if (method.equals("GET") && p.length == 1 && p[0].equals("healthz")) {
      out = new byte[0];
    } else if (p.length >= 3 && p[0].equals("actors")) {
      String type = p[1];
      String id = p[2];
      if (method.equals("DELETE") && p.length == 3) {
        rt.deactivate(type, id).block();
      } else if (p.length == 6 && p[3].equals("method") && p[4].equals("remind")) {
        rt.invokeReminder(type, id, p[5], body).block();
      } else if (p.length == 6 && p[3].equals("method") && p[4].equals("timer")) {
        rt.invokeTimer(type, id, p[5], body).block();
      } else if (p.length == 5 && p[3].equals("method")) {
        out = rt.invoke(type, id, p[4], body).blockOptional().orElse(new byte[0]);
      } else {
        ex.sendResponseHeaders(404, -1);
        return;
      }
    } else {
      ex.sendResponseHeaders(404, -1);
      return;
    }
    ex.getResponseHeaders().add("Content-Type", "application/json");
    ex.sendResponseHeaders(200, out.length == 0 ? -1 : out.length);
    if (out.length > 0) {
      ex.getResponseBody().write(out);
    }
  }
}
