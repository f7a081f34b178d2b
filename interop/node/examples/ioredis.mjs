import Redis from 'ioredis';

const redis = new Redis(process.env.FLAKED_URL ?? 'redis://127.0.0.1:7379');
// IDs of the default layout pass 2^53, where JavaScript Numbers round:
// ask for decimal strings, and keep them as strings or BigInts.
const id = await redis.call('NEXTID', 'STRING'); // '100210993547766064'
const ids = await redis.call('NEXTIDS', '100', 'STRING');
const [time, tick, seq, machine, mode] = await redis.call('PARSE', id);
console.log(id, ids.length, machine, BigInt(id) < BigInt(ids[0]));
redis.disconnect();
