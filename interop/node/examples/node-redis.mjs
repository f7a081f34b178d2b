import { createClient } from 'redis';

const client = await createClient({ url: process.env.FLAKED_URL ?? 'redis://127.0.0.1:7379' })
  .on('error', (err) => console.error(err))
  .connect();
// IDs of the default layout pass 2^53, where JavaScript Numbers round:
// ask for decimal strings, and keep them as strings or BigInts.
const id = await client.sendCommand(['NEXTID', 'STRING']);
const ids = await client.sendCommand(['NEXTIDS', '100', 'STRING']);
const [time, tick, seq, machine, mode] = await client.sendCommand(['PARSE', id]);
console.log(id, ids.length, machine, BigInt(id) < BigInt(ids[0]));
await client.close();
