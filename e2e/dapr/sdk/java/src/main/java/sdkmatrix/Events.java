package sdkmatrix;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;

/**
 * The events file of the Java SDK side of the jobsd SDK matrix (e2e/dapr/sdk.sh): the apps
 * append one JSON object a line (synced before the SDK answers), the client reads them.
 */
final class Events {
  static final ObjectMapper JSON = new ObjectMapper();
  private static FileOutputStream out;

  private Events() {}

  static synchronized void record(String kind, ObjectNode fields) {
    try {
      if (out == null) {
        out = new FileOutputStream(System.getenv("SDKM_EVENTS"), true);
      }
      fields.put("t", System.currentTimeMillis() / 1000.0);
      fields.put("kind", kind);
      out.write((JSON.writeValueAsString(fields) + "\n").getBytes(StandardCharsets.UTF_8));
      out.getFD().sync();
    } catch (IOException e) {
      throw new RuntimeException(e);
    }
  }

  static ObjectNode fields() {
    return JSON.createObjectNode();
  }

  static List<JsonNode> read(String path, Predicate<JsonNode> keep) {
    List<JsonNode> got = new ArrayList<>();
    try {
      for (String line : Files.readAllLines(Path.of(path), StandardCharsets.UTF_8)) {
        if (!line.isBlank()) {
          JsonNode e = JSON.readTree(line);
          if (keep.test(e)) {
            got.add(e);
          }
        }
      }
    } catch (NoSuchFileException e) {
      return got;
    } catch (IOException e) {
      throw new RuntimeException(e);
    }
    return got;
  }

  static List<JsonNode> waitFor(String path, int n, double timeoutS, Predicate<JsonNode> keep)
      throws InterruptedException {
    long deadline = System.nanoTime() + (long) (timeoutS * 1e9);
    for (;;) {
      List<JsonNode> got = read(path, keep);
      if (got.size() >= n || System.nanoTime() > deadline) {
        return got;
      }
      Thread.sleep(100);
    }
  }

  /** How many events matching keep arrive within the next `seconds`. */
  static int quiet(String path, double seconds, Predicate<JsonNode> keep) throws InterruptedException {
    int before = read(path, keep).size();
    Thread.sleep((long) (seconds * 1000));
    return read(path, keep).size() - before;
  }
}
