package sdkmatrix;

import io.dapr.actors.ActorMethod;
import io.dapr.actors.ActorType;
import java.util.Map;
import reactor.core.publisher.Mono;

/** The actor interface the client's ActorProxyBuilder builds a proxy of. */
@ActorType(name = "JavaSdkActor")
public interface JavaSdkActor {
  // A Mono's type is erased: the proxy needs it named to deserialize the answer.
  @ActorMethod(returns = String.class)
  Mono<String> ping(String arg);

  Mono<Void> armReminder(String data);

  Mono<Void> disarmReminder(String name);

  Mono<Void> armTimer(String data);

  Mono<Void> disarmTimer(String name);

  // Actor state, kept with the SDK's actor state manager.
  @ActorMethod(returns = Integer.class)
  Mono<Integer> setCount(Integer n);

  @ActorMethod(returns = Integer.class)
  Mono<Integer> getCount();

  @ActorMethod(returns = Boolean.class)
  Mono<Boolean> removeCount();

  @ActorMethod(returns = Map.class)
  Mono<Map<String, Object>> getSeeded();

  // The timer's callback: the SDK finds a callback among the actor interface's methods only.
  Mono<Void> onTimer(String state);
}
