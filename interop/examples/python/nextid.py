import os

import redis

r = redis.Redis.from_url(os.environ.get("FLAKED_URL", "redis://127.0.0.1:7379"))
flake_id = r.execute_command("NEXTID")  # a Python int: exact, whatever its size
ids = r.execute_command("NEXTIDS", 100)  # 100 ints, strictly increasing
time, tick, seq, machine, mode = r.execute_command("PARSE", flake_id)
with r.pipeline() as p:  # MULTI ... EXEC, redis-py's default pipeline
    p.execute_command("NEXTID").execute_command("NEXTIDS", 2)
    one, two = p.execute()
print(flake_id, len(ids), machine, one < two[0])
