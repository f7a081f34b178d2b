import Redis from 'ioredis';

// The IDs of a NEXTBLOCK reply: first, count, stride [, machine IDs].
// With STRING every element is a decimal string: BigInts keep them exact.
function blockIds(reply) {
  const [first, count, stride, ...machines] = reply.map(BigInt);
  const k = BigInt(machines.length);
  const j = BigInt(machines.indexOf(first % stride)); // machine IDs interleave
  const ids = [];
  for (let i = 0n; i < count; i++) {
    ids.push(k === 0n ? first + i * stride // one machine ID: every stride-th ID
      : first - (first % stride) + ((j + i) / k) * stride + machines[Number((j + i) % k)]);
  }
  return ids;
}

const redis = new Redis(process.env.FLAKED_URL ?? 'redis://127.0.0.1:7379');
const ids = blockIds(await redis.call('NEXTBLOCK', '100', 'STRING'));
const [time, tick, seq, machine, mode] = await redis.call('PARSE', String(ids[0]));
const next = BigInt(await redis.call('NEXTID', 'STRING'));
console.log(String(ids[0]), ids.length, machine, ids.every((id, i) => i === 0 || ids[i - 1] < id) && ids.at(-1) < next);
redis.disconnect();
