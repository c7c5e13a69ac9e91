package sdkmatrix;

import io.dapr.actors.ActorId;
import io.dapr.actors.runtime.AbstractActor;
import io.dapr.actors.runtime.ActorRuntimeContext;
import io.dapr.actors.runtime.Remindable;
import io.dapr.utils.TypeRef;
import java.time.Duration;
import java.util.Map;
import reactor.core.publisher.Mono;

/**
 * JavaSdkActor as a dapr-sdk-actors AbstractActor: it registers and unregisters its reminder and
 * timer with the SDK's own calls (the Java SDK has no reminder or timer call outside an actor),
 * and keeps its state with the SDK's actor state manager (getActorStateManager(); the SDK also
 * saves it after every method).
 */
public class JavaSdkActorImpl extends AbstractActor implements JavaSdkActor, Remindable<String> {
  private static final Duration SECOND = Duration.ofSeconds(1);

  public JavaSdkActorImpl(ActorRuntimeContext<?> ctx, ActorId id) {
    super(ctx, id);
  }

  private void rec(String kind, String name, String text) {
    var f = Events.fields();
    f.put("actor", getId().toString());
    f.put("name", name);
    f.put("text", text);
    Events.record(kind, f);
  }

  @Override
  public Mono<String> ping(String arg) {
    rec("method", "ping", arg);
    return Mono.just("pong:" + arg);
  }

  @Override
  public Mono<Void> armReminder(String data) {
    return registerReminder("r1", data, SECOND, SECOND);
  }

  @Override
  public Mono<Void> disarmReminder(String name) {
    return unregisterReminder(name);
  }

  @Override
  public Mono<Void> armTimer(String data) {
    return registerActorTimer("t1", "onTimer", data, SECOND, SECOND).then();
  }

  @Override
  public Mono<Void> disarmTimer(String name) {
    return unregisterTimer(name);
  }

  // Actor state, as a Java user keeps it: the state manager's cache, saved explicitly
  // (saveState) or by the SDK after the method.
  @Override
  public Mono<Integer> setCount(Integer n) {
    return super.getActorStateManager().set("count", n).then(super.saveState()).thenReturn(n);
  }

  @Override
  public Mono<Integer> getCount() {
    var sm = super.getActorStateManager();
    return sm.contains("count").flatMap(has -> has ? sm.get("count", Integer.class) : Mono.just(-1));
  }

  @Override
  public Mono<Boolean> removeCount() {
    var sm = super.getActorStateManager();
    // saved after the method
    return sm.contains("count").flatMap(has -> has ? sm.remove("count").thenReturn(true) : Mono.just(false));
  }

  @Override
  public Mono<Map<String, Object>> getSeeded() {
    return super.getActorStateManager().get("seeded", new TypeRef<Map<String, Object>>() {});
  }

  @Override
  public Mono<Void> onTimer(String state) {
    rec("timer", "onTimer", state);
    return Mono.empty();
  }

  @Override
  public TypeRef<String> getStateType() {
    return TypeRef.STRING;
  }

  @Override
  public Mono<Void> receiveReminder(String name, String state, Duration dueTime, Duration period) {
    rec("reminder", name, state);
    return Mono.empty();
  }
}
