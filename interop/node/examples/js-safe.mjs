import Redis from 'ioredis';

// The daemons run with a JS-safe layout, every ID below 2^53:
//   flaked serve --bits-id 53 --bits-sequence 8 --bits-machine 8 ...
// so IDs can be plain Numbers (node-redis: the same with sendCommand).
const redis = new Redis(process.env.FLAKED_URL ?? 'redis://127.0.0.1:7379');
const id = await redis.call('NEXTID');
if (!Number.isSafeInteger(id)) throw new Error(`${id}: the daemon's layout is not JS-safe`);
const ids = await redis.call('NEXTIDS', '100');
const [time, tick, seq, machine, mode] = await redis.call('PARSE', String(id));
console.log(id, ids.length, machine, ids.every(Number.isSafeInteger) && id < ids[0]);
redis.disconnect();
