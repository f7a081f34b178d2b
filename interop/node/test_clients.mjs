// ioredis and node-redis against flaked daemons, each with its default
// options (only the URL, and the CA for TLS). Run by the Go harness
// (interop/node_test.go), which starts the daemons and puts their
// addresses in the environment:
//   FLAKED_{PLAIN,AUTH,TLS}_URL  standalone daemons, default layout
//   FLAKED_TLS_CA                the CA of the TLS daemon's certificate
//   FLAKED_FLEET_URLS            three daemons on one redis-server with the
//                                JS-safe layout (--bits-id 53)
//   FLAKED_CONTROL               POST /restart/<flavour> restarts a daemon
// IDs are checked as decimal strings and BigInts, never through floats.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import Redis from 'ioredis';
import { createClient } from 'redis';

const env = process.env;
const FLAVOURS = ['plain', 'auth', 'tls'];
const CONNECT_WITHIN = 5_000;

const urlOf = (flavour) => env[`FLAKED_${flavour.toUpperCase()}_URL`];
const caOf = (flavour) => (flavour === 'tls' ? fs.readFileSync(env.FLAKED_TLS_CA) : undefined);

// Both clients behind one shape: call(...args), pipeline(cmds), multi(cmds),
// close(). Each 'error' listener only keeps the last error for messages:
// without one, an EventEmitter's error event ends the process.
const CLIENTS = {
  async ioredis(url, ca) {
    const r = new Redis(url, ca ? { tls: { ca } } : {});
    let last;
    r.on('error', (err) => { last = err; });
    await within(CONNECT_WITHIN, r.ping(), () => `ioredis did not connect to ${url}: ${last}`);
    const unwrap = (rs) => rs.map(([err, v]) => { if (err) throw err; return v; });
    const chain = (p, cmds) => cmds.reduce((q, args) => q.call(...args), p);
    return {
      call: (...args) => r.call(...args),
      pipeline: async (cmds) => unwrap(await chain(r.pipeline(), cmds).exec()),
      multi: async (cmds) => unwrap(await chain(r.multi(), cmds).exec()),
      close: () => r.disconnect(),
    };
  },
  async 'node-redis'(url, ca) {
    const c = createClient(ca ? { url, socket: { tls: true, ca } } : { url });
    let last;
    c.on('error', (err) => { last = err; });
    try {
      await within(CONNECT_WITHIN, c.connect(), () => `node-redis did not connect to ${url}: ${last}`);
    } catch (err) {
      c.destroy();
      throw err;
    }
    const chain = (m, cmds) => cmds.reduce((q, args) => q.addCommand(args.map(String)), m);
    return {
      call: (...args) => c.sendCommand(args.map(String)),
      pipeline: (cmds) => chain(c.multi(), cmds).execAsPipeline(),
      multi: (cmds) => chain(c.multi(), cmds).exec(),
      close: () => c.destroy(),
    };
  },
};

function within(ms, promise, message) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${message()} (within ${ms} ms)`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// layoutOf reads the sequence and machine bits and the machine IDs from
// INFO flaked.
async function layoutOf(c) {
  const info = String(await c.call('INFO', 'flaked'));
  const field = (name) => info.match(new RegExp(`^${name}:(.*)$`, 'm'))?.[1]?.trim();
  const layout = Object.fromEntries(field('layout').split(',').map((kv) => kv.split('=')));
  return {
    seq: BigInt(layout.seq),
    machine: BigInt(layout.machine),
    machines: new Set(field('machine_ids').split(',').map(Number)),
  };
}

// checkExact puts PARSE's parts together again as a BigInt: they must
// give the same decimal text, under one of the daemon's machine IDs.
async function checkExact(c, layout, text) {
  assert.match(text, /^[1-9][0-9]*$/);
  const [, tick, seq, machine, mode] = await c.call('PARSE', text);
  assert.equal(String(mode), 'flake');
  assert.ok(layout.machines.has(Number(machine)), `machine ${machine} of ${text} is not the daemon's`);
  const whole = (BigInt(tick) << (layout.seq + layout.machine)) | (BigInt(seq) << layout.machine) | BigInt(machine);
  assert.equal(whole.toString(), text);
}

function increasing(texts) {
  for (let i = 1; i < texts.length; i++) {
    assert.ok(BigInt(texts[i - 1]) < BigInt(texts[i]), `${texts[i - 1]} then ${texts[i]}`);
  }
}

async function restart(flavour) {
  const res = await fetch(`${env.FLAKED_CONTROL}/restart/${flavour}`, { method: 'POST' });
  assert.equal(res.status, 200, await res.text());
}

// The harness runs the flavours and the fleet as separate Go tests, each
// with only its own addresses set; the other group is skipped.
const flavoursSet = Boolean(env.FLAKED_PLAIN_URL);
const fleetSet = Boolean(env.FLAKED_FLEET_URLS);

// Why NEXTID STRING: the IDs of neighbouring machine IDs in one tick of the
// default layout (39/8/16) become the same Number.
test('default layout: two machines\' IDs of one tick are one Number', { skip: !flavoursSet }, () => {
  const tick = 5_978_107_823n;
  const [a, b] = [2n, 3n].map((machine) => (tick << 24n) | (7n << 16n) | machine);
  assert.notEqual(a, b);
  assert.equal(Number(a), Number(b));
});

for (const name of Object.keys(CLIENTS)) {
  for (const flavour of FLAVOURS) {
    // One client per flavour for all its checks, in order; the restart
    // last. A client that cannot connect fails them all at once.
    describe(`${name} ${flavour}`, { skip: !flavoursSet, timeout: 60_000 }, () => {
      let c;
      let layout;
      before(async () => {
        c = await CLIENTS[name](urlOf(flavour), caOf(flavour));
        layout = await layoutOf(c);
      });
      after(() => c?.close());

      test('connect', async () => {
        assert.equal(await c.call('PING'), 'PONG');
      });
      test('NEXTID is a Number, inexact above 2^53 (the default layout)', async () => {
        const id = await c.call('NEXTID');
        assert.equal(typeof id, 'number');
        assert.ok(!Number.isSafeInteger(id), `${id} is safe: the layout is not the default one`);
      });
      test('NEXTID STRING is exact', async () => {
        const id = await c.call('NEXTID', 'STRING');
        assert.equal(typeof id, 'string');
        await checkExact(c, layout, id);
      });
      test('NEXTIDS n STRING', async () => {
        const ids = await c.call('NEXTIDS', '100', 'STRING');
        assert.equal(ids.length, 100);
        assert.ok(ids.every((id) => typeof id === 'string'));
        increasing(ids);
        await checkExact(c, layout, ids[0]);
        await checkExact(c, layout, ids[99]);
      });
      test('INFO', async () => {
        const info = String(await c.call('INFO'));
        assert.match(info, /^mode:flake\r?$/m);
        assert.match(info, /^ready:1\r?$/m);
      });
      test('pipeline', async () => {
        const [pong, three, info] = await c.pipeline([['PING'], ['NEXTIDS', '3'], ['INFO', 'flaked']]);
        assert.equal(pong, 'PONG');
        assert.equal(three.length, 3);
        assert.ok(three.every((id) => typeof id === 'number'));
        assert.match(String(info), /^machine_ids:/m);
      });
      test('transaction (MULTI/EXEC)', async () => {
        const [one, two] = await c.multi([['NEXTID', 'STRING'], ['NEXTIDS', '2', 'STRING']]);
        increasing([one, ...two]);
        await checkExact(c, layout, one);
      });
      test('reconnect after a daemon restart', async () => {
        const before = await c.call('NEXTID');
        await restart(flavour);
        // Both reconnect by themselves and queue commands meanwhile (their
        // offline queues), so the first command after the restart succeeds.
        const after = await c.call('NEXTID');
        assert.ok(after > before, `${after} after ${before}`);
      });
    });
  }

  test(`${name} JS-safe fleet: 100,000 IDs from three daemons are exact Numbers, none twice`, { timeout: 120_000, skip: !fleetSet }, async () => {
    const urls = env.FLAKED_FLEET_URLS.split(',');
    const clients = await Promise.all(urls.map((u) => CLIENTS[name](u)));
    try {
      const layouts = await Promise.all(clients.map(layoutOf));
      const batches = await Promise.all(clients.map((c, i) => collect(c, layouts[i], 100_000 / urls.length)));
      const all = batches.flat();
      assert.ok(all.length >= 100_000, `${all.length} IDs`);
      const seen = new Set();
      for (const id of all) {
        assert.ok(!seen.has(id), `${id} issued twice`);
        seen.add(id);
      }
    } finally {
      clients.forEach((c) => c.close());
    }
  });
}

// collect asks one daemon for about n IDs in batches of 1000 and checks
// each: a safe integer (so parsed without rounding), strictly increasing,
// and the first and last of every batch equal to PARSE's parts put
// together as a BigInt.
async function collect(c, layout, n) {
  const out = [];
  while (out.length < n) {
    const ids = await c.call('NEXTIDS', '1000');
    assert.equal(ids.length, 1000);
    for (const id of ids) {
      assert.ok(Number.isSafeInteger(id), `${id} is not a safe integer`);
    }
    increasing(ids.map(String));
    await checkExact(c, layout, String(ids[0]));
    await checkExact(c, layout, String(ids[999]));
    out.push(...ids);
  }
  return out;
}
