import os

import redis


def block_ids(reply):
    """The IDs of a NEXTBLOCK reply: first, count, stride [, machine IDs]."""
    first, count, stride, *machines = (int(v) for v in reply)
    if not machines:  # one machine ID: every stride-th ID from first
        return [first + i * stride for i in range(count)]
    k, j = len(machines), machines.index(first % stride)  # machine IDs interleave
    return [first - first % stride + (j + i) // k * stride + machines[(j + i) % k] for i in range(count)]


r = redis.Redis.from_url(os.environ.get("FLAKED_URL", "redis://127.0.0.1:7379"))
ids = block_ids(r.execute_command("NEXTBLOCK", 100))  # up to 100 IDs in one short reply
time, tick, seq, machine, mode = r.execute_command("PARSE", ids[0])
increasing = all(a < b for a, b in zip(ids, ids[1:]))
print(ids[0], len(ids), machine, increasing and ids[-1] < r.execute_command("NEXTID"))
