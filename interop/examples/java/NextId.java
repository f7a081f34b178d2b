import java.util.List;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.util.SafeEncoder;

public class NextId {
  enum Flaked implements ProtocolCommand {
    NEXTID, NEXTIDS, PARSE;

    public byte[] getRaw() { return SafeEncoder.encode(name()); }
  }

  public static void main(String[] args) {
    String url = System.getenv().getOrDefault("FLAKED_URL", "redis://127.0.0.1:7379");
    try (JedisPooled jedis = new JedisPooled(java.net.URI.create(url))) {
      long id = (Long) jedis.sendCommand(Flaked.NEXTID); // a Java long holds every 63-bit ID
      List<?> ids = (List<?>) jedis.sendCommand(Flaked.NEXTIDS, "100");
      List<?> parts = (List<?>) jedis.sendCommand(Flaked.PARSE, Long.toString(id));
      System.out.println(id + " " + ids.size() + " " + parts.get(3));
    }
  }
}
