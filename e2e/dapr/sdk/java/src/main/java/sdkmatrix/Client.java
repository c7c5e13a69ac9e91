package sdkmatrix;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.dapr.actors.ActorId;
import io.dapr.actors.client.ActorClient;
import io.dapr.actors.client.ActorProxyBuilder;
import io.dapr.client.DaprClientBuilder;
import io.dapr.client.DaprPreviewClient;
import io.dapr.client.domain.ConstantFailurePolicy;
import io.dapr.client.domain.DeleteJobRequest;
import io.dapr.client.domain.DropFailurePolicy;
import io.dapr.client.domain.GetJobRequest;
import io.dapr.client.domain.GetJobResponse;
import io.dapr.client.domain.JobSchedule;
import io.dapr.client.domain.ScheduleJobRequest;
import io.dapr.config.Properties;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;

/**
 * The Java SDK as a client: the matrix's checks (see e2e/dapr/sdk.sh), each printed as
 * {@code RESULT<TAB>feature<TAB>pass|fail|na<TAB>note}. Jobs through DaprPreviewClient to the jobs
 * app's sidecar; actor calls through ActorClient + ActorProxyBuilder to the actor app's sidecar
 * (DAPR_GRPC_PORT); what the apps received is read from their events files.
 */
public final class Client {
  interface Check {
    String run() throws Exception;
  }

  static int failed = 0;
  static final String JOBS_EV = System.getenv("SDKM_JOBS_EVENTS");
  static final String ACTOR_EV = System.getenv("SDKM_ACTOR_EVENTS");

  static synchronized void emit(String feature, String status, String note) {
    if (status.equals("fail")) {
      failed++;
    }
    System.out.println("RESULT\t" + feature + "\t" + status + "\t" + String.valueOf(note).replaceAll("\\s+", " "));
    System.out.flush();
  }

  static boolean run(String feature, Check c) {
    try {
      emit(feature, "pass", c.run());
      return true;
    } catch (Throwable e) {
      emit(feature, "fail", e.getClass().getSimpleName() + ": " + e.getMessage());
      return false;
    }
  }

  static void check(boolean ok, String msg) {
    if (!ok) {
      throw new AssertionError(msg);
    }
  }

  /** Ticks (or deliveries) of a 1 s period come at least 0.5 s apart. */
  static void checkSpacing(List<JsonNode> got) {
    for (int i = 1; i < got.size(); i++) {
      double gap = got.get(i).path("t").asDouble() - got.get(i - 1).path("t").asDouble();
      check(gap >= 0.5, "ticks " + gap + " s apart (period 1 s)");
    }
  }

  static byte[] payload(String tag) {
    return ("java-sdk " + tag + ": h\u00e9llo \u2713 {\"k\":[1,2]} \u0000\u0001").getBytes(StandardCharsets.UTF_8);
  }

  static Predicate<JsonNode> jobNamed(String name) {
    return e -> e.path("kind").asText().equals("job") && e.path("name").asText().equals(name);
  }

  static byte[] b64(JsonNode e) {
    return Base64.getDecoder().decode(e.path("data_b64").asText());
  }

  static void jobs(DaprPreviewClient c) {
    run("job.schedule", () -> {
      c.scheduleJob(new ScheduleJobRequest("get1", JobSchedule.fromString("@every 1h")).setRepeat(3)
          .setData(payload("get1"))).block();
      return "DaprPreviewClient.scheduleJob @every 1h x3 with data";
    });
    run("job.get", () -> {
      GetJobResponse j = c.getJob(new GetJobRequest("get1")).block();
      check(j.getSchedule() != null && j.getSchedule().getExpression().equals("@every 1h")
          && Integer.valueOf(3).equals(j.getRepeats()), "schedule=" + (j.getSchedule() == null ? null : j.getSchedule().getExpression())
          + " repeats=" + j.getRepeats());
      check(Arrays.equals(j.getData(), payload("get1")), "data differs");
      return "getJob: schedule, repeats and data as scheduled";
    });
    emit("job.list", "na", "no list in io.dapr:dapr-sdk 1.16.1: neither DaprPreviewClient nor its autogen Dapr stubs have ListJobsAlpha1");
    run("job.delete", () -> {
      c.deleteJob(new DeleteJobRequest("get1")).block();
      try {
        c.getJob(new GetJobRequest("get1")).block();
      } catch (io.dapr.exceptions.DaprException e) {
        check(e.getErrorCode().contains("INTERNAL"), "want INTERNAL (as daprd), got " + e.getErrorCode());
        return "deleteJob, then getJob fails with INTERNAL (as daprd)";
      }
      throw new AssertionError("getJob after deleteJob succeeded");
    });
    run("job.receive", () -> {
      c.scheduleJob(new ScheduleJobRequest("recv", Instant.now().plusSeconds(1)).setData(payload("recv"))).block();
      List<JsonNode> got = Events.waitFor(JOBS_EV, 1, 20, jobNamed("recv"));
      check(got.size() == 1, got.size() + " events of job recv in 20 s, want 1");
      check(Arrays.equals(b64(got.get(0)), payload("recv")), "data differs: " + got.get(0));
      int n = Events.quiet(JOBS_EV, 2, jobNamed("recv"));
      check(n == 0, "one-shot job delivered " + n + " more times");
      return "no job handler in dapr-sdk: received once on its autogen AppCallbackAlpha stubs, data bytes intact";
    });
    run("job.repeats", () -> {
      c.scheduleJob(new ScheduleJobRequest("rep", JobSchedule.fromString("@every 1s")).setRepeat(3)
          .setData(payload("rep"))).block();
      List<JsonNode> got = Events.waitFor(JOBS_EV, 3, 20, jobNamed("rep"));
      check(got.size() == 3, "@every 1s x3: " + got.size() + " deliveries in 20 s, want 3");
      for (JsonNode e : got) {
        check(Arrays.equals(b64(e), payload("rep")), "data differs: " + e);
      }
      checkSpacing(got);
      int n = Events.quiet(JOBS_EV, 2, jobNamed("rep"));
      check(n == 0, n + " deliveries beyond the 3 repeats");
      try {
        c.getJob(new GetJobRequest("rep")).block();
        throw new AssertionError("getJob still finds the job after its last repeat");
      } catch (io.dapr.exceptions.DaprException e) {
        return "@every 1s x3: exactly 3 deliveries ~1 s apart, data intact, then gone";
      }
    });
    run("job.overwrite", () -> {
      c.scheduleJob(new ScheduleJobRequest("ow", Instant.now().plusSeconds(3600)).setData(payload("ow-a"))).block();
      try {
        c.scheduleJob(new ScheduleJobRequest("ow", Instant.now().plusSeconds(3600)).setData(payload("ow-b"))).block();
        throw new AssertionError("second scheduleJob without overwrite succeeded");
      } catch (io.dapr.exceptions.DaprException e) {
        check(e.getErrorCode().contains("ALREADY_EXISTS"), "want ALREADY_EXISTS, got " + e.getErrorCode() + ": " + e.getMessage());
      }
      c.scheduleJob(new ScheduleJobRequest("ow", Instant.now().plusSeconds(1)).setData(payload("ow-b")).setOverwrite(true)).block();
      List<JsonNode> got = Events.waitFor(JOBS_EV, 1, 20, jobNamed("ow"));
      check(got.size() == 1 && Arrays.equals(b64(got.get(0)), payload("ow-b")),
          "after overwrite: " + got.size() + " deliveries (want 1 with the new data)");
      return "ALREADY_EXISTS without overwrite; setOverwrite(true) replaces data and due time";
    });
    run("job.failure_policy", () -> {
      // dapr-sdk 1.16.1 sends and reads only the nanos of the interval (Duration.getNano(): 1 s
      // goes out as 0 s), so the interval is kept under a second: 900 ms.
      Duration interval = Duration.ofMillis(900);
      ConstantFailurePolicy constant = new ConstantFailurePolicy(2).setDurationBetweenRetries(interval);
      c.scheduleJob(new ScheduleJobRequest("fp-get", Instant.now().plusSeconds(3600)).setFailurePolicy(constant)).block();
      GetJobResponse j = c.getJob(new GetJobRequest("fp-get")).block();
      check(j.getFailurePolicy() instanceof ConstantFailurePolicy, "getJob's failure policy: " + j.getFailurePolicy());
      ConstantFailurePolicy fp = (ConstantFailurePolicy) j.getFailurePolicy();
      check(Integer.valueOf(2).equals(fp.getMaxRetries()) && interval.equals(fp.getDurationBetweenRetries()),
          "getJob's failure policy: maxRetries=" + fp.getMaxRetries() + " interval=" + fp.getDurationBetweenRetries());
      c.deleteJob(new DeleteJobRequest("fp-get")).block();
      c.scheduleJob(new ScheduleJobRequest("fail-const", Instant.now().plusSeconds(1)).setData(payload("fc"))
          .setFailurePolicy(new ConstantFailurePolicy(2).setDurationBetweenRetries(interval))).block();
      c.scheduleJob(new ScheduleJobRequest("fail-drop", Instant.now().plusSeconds(1)).setData(payload("fd"))
          .setFailurePolicy(new DropFailurePolicy())).block();
      List<JsonNode> got = Events.waitFor(JOBS_EV, 3, 30, jobNamed("fail-const"));
      check(got.size() == 3, "constant 900ms x2: " + got.size() + " attempts in 30 s, want 3");
      for (int i = 1; i < got.size(); i++) {
        double gap = got.get(i).path("t").asDouble() - got.get(i - 1).path("t").asDouble();
        check(gap >= 0.7, "retry " + i + " came " + gap + " s after the previous attempt (interval 900 ms)");
      }
      int n = Events.quiet(JOBS_EV, 3, jobNamed("fail-const"));
      check(n == 0, n + " attempts beyond the 3");
      int d = Events.read(JOBS_EV, jobNamed("fail-drop")).size();
      check(d == 1, "drop policy: " + d + " attempts, want 1");
      return "getJob returns constant 900ms x2; a failing app gets 1+2 attempts >=0.9 s apart; drop: 1 (900 ms: the SDK drops an interval's seconds)";
    });
  }

  static HttpResponse<String> getReminder(String name) throws Exception {
    String url = "http://127.0.0.1:" + System.getenv("SDKM_ACTORS_HTTP") + "/v1.0/actors/JavaSdkActor/a1/reminders/" + name;
    return HttpClient.newHttpClient().send(HttpRequest.newBuilder(URI.create(url)).GET().build(),
        HttpResponse.BodyHandlers.ofString());
  }

  static void actors() throws Exception {
    ActorClient ac = new ActorClient();
    JavaSdkActor actor = new ActorProxyBuilder<>(JavaSdkActor.class, ac).build(new ActorId("a1"));
    String remData = "java-sdk reminder h\u00e9llo \u2713";
    Predicate<JsonNode> reminder = e -> e.path("kind").asText().equals("reminder") && e.path("actor").asText().equals("a1")
        && e.path("name").asText().equals("r1");
    Predicate<JsonNode> timer = e -> e.path("kind").asText().equals("timer") && e.path("actor").asText().equals("a1");
    Check invoke = () -> {
      String out = actor.ping("hi").block();
      check("pong:hi".equals(out), "ping answered " + out);
      return "ActorProxyBuilder ping through the sidecar (ActorClient, gRPC)";
    };
    if (!run("actor.invoke", invoke)) {
      // The first call failed (recorded above); the other checks still run once a call goes through.
      long t0 = System.nanoTime();
      for (;;) {
        try {
          invoke.run();
          System.out.printf("# a later actor call succeeded %.1f s after%n", (System.nanoTime() - t0) / 1e9);
          break;
        } catch (Throwable e) {
          if (System.nanoTime() - t0 > 20e9) {
            for (String f : List.of("reminder.register", "reminder.get", "reminder.ticks", "reminder.unregister", "actor.timer",
                "actor.state")) {
              emit(f, "fail", "skipped: no actor call succeeded within 20 s");
            }
            return;
          }
          Thread.sleep(200);
        }
      }
    }
    boolean registered = run("reminder.register", () -> {
      actor.armReminder(remData).block();
      return "no client call in the SDK: the actor's registerReminder due 1s period 1s";
    });
    run("reminder.get", () -> {
      HttpResponse<String> r = getReminder("r1");
      check(r.statusCode() == 200 && r.body().contains("period"), "GET reminder: " + r.statusCode() + " " + r.body());
      return "the SDK has no get: sidecar HTTP GET 200 " + r.body();
    });
    run("reminder.ticks", () -> {
      check(registered, "not registered");
      List<JsonNode> got = Events.waitFor(ACTOR_EV, 3, 20, reminder);
      check(got.size() >= 3, got.size() + " ticks in 20 s, want >= 3");
      for (JsonNode e : got) {
        check(remData.equals(e.path("text").asText()), "receiveReminder state " + e.path("text"));
      }
      checkSpacing(got);
      return "receiveReminder >= 3 ticks, state intact";
    });
    run("reminder.unregister", () -> {
      actor.disarmReminder("r1").block();
      Thread.sleep(1500); // a tick already in flight may still land
      int n = Events.quiet(ACTOR_EV, 3, reminder);
      check(n == 0, n + " ticks after unregistering");
      HttpResponse<String> r = getReminder("r1");
      check(r.statusCode() != 200, "GET after unregister: " + r.statusCode() + " " + r.body());
      return "unregisterReminder: no more ticks, GET then " + r.statusCode();
    });
    run("actor.timer", () -> {
      String data = "java-sdk timer h\u00e9llo \u2713";
      actor.armTimer(data).block();
      List<JsonNode> got = Events.waitFor(ACTOR_EV, 3, 20, timer);
      check(got.size() >= 3, got.size() + " timer ticks in 20 s, want >= 3");
      for (JsonNode e : got) {
        check(data.equals(e.path("text").asText()), "onTimer got " + e.path("text"));
      }
      checkSpacing(got);
      actor.disarmTimer("t1").block();
      Thread.sleep(1500);
      int n = Events.quiet(ACTOR_EV, 3, timer);
      check(n == 0, n + " timer ticks after unregistering");
      return "the actor's registerActorTimer: >= 3 callbacks with their state; unregisterTimer stops it";
    });
    actorState(ac);
    ac.close();
  }

  static final String NO_STATE =
      "a Dapr Scheduler keeps no actor state: the jobsd sidecar answers daprd's ERR_ACTOR_RUNTIME_NOT_FOUND";

  /** The sidecar's actor state routes, raw: GET …/state/{key}, or POST …/state with body. */
  static HttpResponse<String> httpState(String id, String key, String body) throws Exception {
    String url = "http://127.0.0.1:" + System.getenv("SDKM_ACTORS_HTTP") + "/v1.0/actors/JavaSdkActor/" + id + "/state"
        + (key == null ? "" : "/" + key);
    HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(url));
    if (body != null) {
      b.header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body));
    }
    return HttpClient.newHttpClient().send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  static boolean runtimeNotFound(HttpResponse<String> r) {
    try {
      return r.statusCode() == 500
          && "ERR_ACTOR_RUNTIME_NOT_FOUND".equals(new ObjectMapper().readTree(r.body()).path("errorCode").asText());
    } catch (Exception e) {
      return false;
    }
  }

  /**
   * actor.state: JavaSdkActor keeps "count" with the SDK's actor state manager; the client calls
   * it through ActorProxyBuilder and reads the value raw over the sidecar.
   */
  static void actorState(ActorClient ac) throws Exception {
    JavaSdkActor s1 = new ActorProxyBuilder<>(JavaSdkActor.class, ac).build(new ActorId("s1"));
    if ("ii".equals(System.getenv("SDKM_PATH"))) {
      // No actor state behind a Dapr Scheduler: check the sidecar really says so.
      try {
        s1.setCount(7).block();
        emit("actor.state", "fail", "setCount succeeded on a sidecar that keeps no actor state");
        return;
      } catch (RuntimeException e) {
        // expected
      }
      HttpResponse<String> get = httpState("s1", "count", null);
      HttpResponse<String> post = httpState("s1", null,
          "[{\"operation\":\"upsert\",\"request\":{\"key\":\"count\",\"value\":1}}]");
      if (!runtimeNotFound(get) || !runtimeNotFound(post)) {
        emit("actor.state", "fail", "want 500 ERR_ACTOR_RUNTIME_NOT_FOUND, got GET " + get.statusCode() + " " + get.body()
            + "; POST " + post.statusCode() + " " + post.body());
        return;
      }
      emit("actor.state", "na", NO_STATE
          + " (checked: GET …/state/count and POST …/state 500 ERR_ACTOR_RUNTIME_NOT_FOUND; the actor's setCount fails)");
      return;
    }
    run("actor.state", () -> {
      for (int n : new int[] {7, 8}) {
        Integer set = s1.setCount(n).block();
        check(Integer.valueOf(n).equals(set), "setCount(" + n + ") answered " + set);
        Integer got = s1.getCount().block();
        check(Integer.valueOf(n).equals(got), "getCount after setCount(" + n + "): " + got);
      }
      HttpResponse<String> r = httpState("s1", "count", null);
      check(r.statusCode() == 200 && r.body().equals("8"), "sidecar GET …/state/count: " + r.statusCode() + " " + r.body()
          + ", want 200 8");
      r = httpState("s1", null,
          "[{\"operation\":\"upsert\",\"request\":{\"key\":\"seeded\",\"value\":{\"n\":5,\"s\":\"h\u00e9llo \u2713\",\"l\":[1,2]}}}]");
      check(r.statusCode() == 204, "sidecar POST …/state: " + r.statusCode() + " " + r.body());
      Map<String, Object> seeded = s1.getSeeded().block();
      Map<String, Object> want = Map.of("n", 5, "s", "h\u00e9llo \u2713", "l", List.of(1, 2));
      check(want.equals(seeded), "getSeeded: " + seeded + ", want " + want);
      Boolean removed = s1.removeCount().block();
      check(Boolean.TRUE.equals(removed), "removeCount answered " + removed);
      Integer after = s1.getCount().block();
      check(Integer.valueOf(-1).equals(after), "getCount after removeCount: " + after + ", want -1");
      r = httpState("s1", "count", null);
      check(r.statusCode() == 204 && r.body().isEmpty(), "sidecar GET …/state/count after removal: " + r.statusCode() + " "
          + r.body() + ", want 204");
      return "ActorProxyBuilder setCount 7, 8 / getCount / removeCount: the actor's getActorStateManager() set+saveState, "
          + "contains+get, remove (saved by the SDK after the method); sidecar GET …/state/count = 8 as the SDK serialized it, "
          + "204 after removal; a value POSTed over the sidecar read back by get";
    });
  }

  public static void main(String[] args) throws Exception {
    // The jobs and the actor checks go to different sidecars and apps: they run side by side.
    Thread jobsThread = new Thread(() -> {
      try (DaprPreviewClient c = new DaprClientBuilder()
          .withPropertyOverride(Properties.SIDECAR_IP, "127.0.0.1")
          .withPropertyOverride(Properties.GRPC_PORT, System.getenv("SDKM_JOBS_GRPC"))
          .withPropertyOverride(Properties.HTTP_PORT, System.getenv("SDKM_JOBS_HTTP"))
          .buildPreviewClient()) {
        jobs(c);
      } catch (Exception e) {
        emit("job.schedule", "fail", "client: " + e);
      }
    });
    if (System.getenv("SDKM_JOBS_GRPC") != null) {
      jobsThread.start();
    }
    if (System.getenv("SDKM_ACTORS_GRPC") != null) {
      actors();
    }
    if (jobsThread.isAlive() || jobsThread.getState() != Thread.State.NEW) {
      jobsThread.join();
    }
    synchronized (Client.class) {
      System.exit(failed > 0 ? 1 : 0);
    }
  }
}
