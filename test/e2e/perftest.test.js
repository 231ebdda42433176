// perftest's tools (ib_{send,write,read,atomic}_{lat,bw}) end to end: server and client as two
// processes on loopback over every device under test whose QPs connect by their keys (RC QPs of
// an InfiniBand-transport device: soft RoCE, native RoCE/IB), checking the exit codes, the banner,
// the address lines and the result rows perftest prints. Then what perftest does with a bad
// command line, a server that is not there and a peer that sends garbage on the side channel.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { join } from 'node:path';
import { REPO_ROOT, startCli, runCli, describeRun, waitListening, waitRoceListening } from '../lib/tools.js';
import { freePort } from '../lib/ports.js';
import { testDevices, Cap } from '../lib/devices.js';
import { TransportType } from '../../dist/index.js';

const cli = (name) => join(REPO_ROOT, 'dist', 'cli', `${name}.js`);
// A private RoCE UDP port: other tests on this host never see these datagrams.
const ENV = { RDMACM_ROCE_PORT: String(40000 + Math.floor(Math.random() * 20000)) };
const LINE = '-'.repeat(87);

/** Start the server, wait for its side channel, run the client: both results. */
async function pair(tool, args, { clientArgs = args, timeoutMs = 90_000, env = {}, roceCm = false } = {}) {
  const port = await freePort();
  const srv = startCli(cli(tool), ['-p', String(port), ...args], { env: { ...ENV, ...env }, timeoutMs });
  try {
    // -R over RoCE: the server's side channel listens in the IB CM, not on a TCP port.
    if (roceCm) await waitRoceListening(ENV.RDMACM_ROCE_PORT, port, srv.done, 30_000);
    else await waitListening(port, { exited: srv.done, timeoutMs: 30_000 });
    const c = await runCli(cli(tool), ['-p', String(port), ...clientArgs, '127.0.0.1'], { env: { ...ENV, ...env }, timeoutMs });
    const s = await srv.done;
    return { cli: c, srv: s, both: `${describeRun('client', c)}\n${describeRun('server', s)}` };
  } finally {
    srv.kill('SIGKILL');
  }
}

const BW_ROW = /^ (\d+)\s+(\d+)\s+(\d+\.\d\d)\s+(\d+\.\d\d) *\t\t   (\d+\.\d{6})$/;
const LAT_ROW = /^ (\d+)\s+(\d+)\s+(\d+\.\d\d)\s+(\d+\.\d\d)\s+(\d+\.\d\d)\s+\t\s+(\d+\.\d\d)\s+\t(\d+\.\d\d|-nan)\s*\t\t(\d+\.\d\d)\s*\t\t(\d+\.\d\d) *$/;
// printf's %#0Nx: zero-padded to N with the "0x" counted, longer values in full, a zero as N zeros.
const ADDR = /^ (local|remote) address: LID (0{4}|0x[0-9a-f]{2,}) QPN (0{6}|0x[0-9a-f]{4,}) PSN (0{6}|0x[0-9a-f]{4,})( OUT (0{4}|0x[0-9a-f]{2,}))?( RKey (0{8}|0x[0-9a-f]{6,}) VAddr (0{16}|0x[0-9a-f]{14,}))?$/;
const GID = /^ GID: (\d\d\d?:){15}\d\d\d?$/;

/** The lines of a run's output between the banner's title and the end. */
function checkBanner(out, title, dev) {
  const l = out.split('\n');
  const at = l.indexOf(`                    ${title}`);
  assert.ok(at > 0, `no "${title}" banner in:\n${out}`);
  assert.equal(l[at - 1], LINE);
  assert.equal(l[at + 1], ` Dual-port       : OFF\t\tDevice         : ${dev}`);
  assert.match(l[at + 2], /^ Number of qps   : 1\t\tTransport type : (IB|IW)$/);
  assert.match(l[at + 3], /^ Connection type : (RC|UC|UD)\t\tUsing SRQ      : OFF$/);
  assert.ok(l.includes(' Data ex. method : Ethernet') || l.includes(' Data ex. method : rdma_cm'), out);
  return l;
}

/** The address lines: local then remote, each with its GID when a GID index is in use. */
function checkAddresses(l) {
  const addr = l.filter((x) => x.includes(' address: '));
  assert.equal(addr.length, 2, l.join('\n'));
  for (const a of addr) assert.match(a, ADDR);
  assert.match(addr[0], /^ local/);
  assert.match(addr[1], /^ remote/);
  for (const g of l.filter((x) => x.startsWith(' GID: '))) assert.match(g, GID);
}

const roceDevices = testDevices().filter((d) => d.caps.has(Cap.RC) && d.transportType === TransportType.IB);

for (const d of roceDevices) {
  describe(`[${d.name}] perftest tools`, () => {
    const dev = ['-d', d.name];

    test('ib_write_bw -n 300: both exit 0, the banner, the addresses, one row that the server prints as the client measured it', async () => {
      const r = await pair('ib_write_bw', [...dev, '-n', '300']);
      assert.equal(r.cli.code, 0, r.both);
      assert.equal(r.srv.code, 0, r.both);
      for (const out of [r.cli.stdout, r.srv.stdout]) {
        const l = checkBanner(out, 'RDMA_Write BW Test', d.name);
        checkAddresses(l);
        assert.ok(l.includes(' #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]'), out);
      }
      assert.match(r.srv.stdout, /^\n\*{36}\n\* Waiting for client to connect\.\.\. \*\n\*{36}\n/);
      assert.ok(r.cli.stdout.includes(' TX depth        : 128\n'), r.both);
      assert.ok(!r.srv.stdout.includes(' TX depth'), r.both);
      const rows = (s) => s.split('\n').filter((x) => BW_ROW.test(x));
      assert.equal(rows(r.cli.stdout).length, 1, r.both);
      const m = BW_ROW.exec(rows(r.cli.stdout)[0]);
      assert.equal(m[1], '65536');
      assert.equal(m[2], '300');
      assert.ok(Number(m[4]) > 0, r.both);
      assert.deepEqual(rows(r.srv.stdout), rows(r.cli.stdout), 'the server prints the report the client sent');
      assert.ok(r.cli.stdout.endsWith(`${rows(r.cli.stdout)[0]}\n${LINE}\n`), r.both);
      // The two sides' addresses cross: my local QPN is the peer's remote one.
      const qpn = (s, side) => new RegExp(`^ ${side} address: .* QPN (0x[0-9a-f]+)`, 'm').exec(s)[1];
      assert.equal(qpn(r.cli.stdout, 'local'), qpn(r.srv.stdout, 'remote'));
      assert.equal(qpn(r.srv.stdout, 'local'), qpn(r.cli.stdout, 'remote'));
      assert.equal(r.cli.stderr, '', r.both);
    });

    test('ib_send_lat -n 200: both exit 0, the latency header and one row on each side', async () => {
      const r = await pair('ib_send_lat', [...dev, '-n', '200']);
      assert.equal(r.cli.code, 0, r.both);
      assert.equal(r.srv.code, 0, r.both);
      for (const out of [r.cli.stdout, r.srv.stdout]) {
        const l = checkBanner(out, 'Send Latency Test', d.name);
        checkAddresses(l);
        assert.ok(l.includes(' #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] '), out);
        const rows = l.filter((x) => LAT_ROW.test(x));
        assert.equal(rows.length, 1, out);
        const m = LAT_ROW.exec(rows[0]);
        assert.equal(m[1], '2');
        assert.equal(m[2], '200');
        assert.ok(Number(m[3]) <= Number(m[5]) && Number(m[5]) <= Number(m[4]), `min <= typical <= max: ${rows[0]}`);
        assert.ok(!out.includes(' RKey'), 'SEND prints no rkey');
      }
      assert.ok(r.srv.stdout.includes(' RX depth        : 200\n'), 'the RX depth, capped at the iterations');
    });

    test('ib_send_bw, ib_read_bw, ib_write_lat, ib_read_lat: exit 0/0 with a row each', async () => {
      const cases = [
        ['ib_send_bw', ['-n', '200', '-s', '4096'], BW_ROW, 'Send BW Test'],
        ['ib_read_bw', ['-n', '200'], BW_ROW, 'RDMA_Read BW Test'],
        ['ib_write_lat', ['-n', '100'], LAT_ROW, 'RDMA_Write Latency Test'],
        ['ib_read_lat', ['-n', '100'], LAT_ROW, 'RDMA_Read Latency Test'],
      ];
      for (const [tool, args, row, title] of cases) {
        const r = await pair(tool, [...dev, ...args]);
        assert.equal(r.cli.code, 0, r.both);
        assert.equal(r.srv.code, 0, r.both);
        checkAddresses(checkBanner(r.cli.stdout, title, d.name));
        assert.equal(r.cli.stdout.split('\n').filter((x) => row.test(x)).length, 1, r.both);
        // read_lat's server only waits for the client; every other server prints a row too.
        assert.equal(r.srv.stdout.split('\n').filter((x) => row.test(x)).length, tool === 'ib_read_lat' ? 0 : 1, r.both);
      }
    });

    test('-D 3: ib_write_bw and ib_send_lat run for the duration and report the sample', async () => {
      const bw = await pair('ib_write_bw', [...dev, '-D', '3', '-s', '4096']);
      assert.equal(bw.cli.code, 0, bw.both);
      assert.equal(bw.srv.code, 0, bw.both);
      const row = bw.cli.stdout.split('\n').find((x) => BW_ROW.test(x));
      assert.ok(row, bw.both);
      const m = BW_ROW.exec(row);
      assert.ok(Number(m[2]) > 0, `iterations of the sample: ${row}`);
      assert.equal(m[3], '0.00', 'no peak in a duration run');
      const lat = await pair('ib_send_lat', [...dev, '-D', '3']);
      assert.equal(lat.cli.code, 0, lat.both);
      assert.equal(lat.srv.code, 0, lat.both);
      for (const out of [lat.cli.stdout, lat.srv.stdout]) {
        assert.ok(out.includes(' #bytes        #iterations       t_avg[usec]    tps average\n'), lat.both);
        assert.match(out, /^ 2 {7}\s+\d+\s+\d+\.\d\d\s+\d+\.\d\d\s*$/m, lat.both);
      }
    });

    const ctx = d.device.open();
    const atomics = ctx.queryDevice().atomicCap !== 0;
    if (atomics) {
      test('ib_atomic_bw and ib_atomic_lat -A CMP_AND_SWAP: 8-byte rows, exit 0/0', async () => {
        for (const [tool, args, row, title] of [
          ['ib_atomic_bw', ['-n', '200'], BW_ROW, 'Atomic FETCH_AND_ADD BW Test'],
          ['ib_atomic_lat', ['-n', '100', '-A', 'CMP_AND_SWAP'], LAT_ROW, 'Atomic CMP_AND_SWAP Latency Test'],
        ]) {
          const r = await pair(tool, [...dev, ...args]);
          assert.equal(r.cli.code, 0, r.both);
          assert.equal(r.srv.code, 0, r.both);
          checkAddresses(checkBanner(r.cli.stdout, title, d.name));
          const rows = r.cli.stdout.split('\n').filter((x) => row.test(x));
          assert.equal(rows.length, 1, r.both);
          assert.equal(row.exec(rows[0])[1], '8', r.both);
        }
      });
    }

    if (d.caps.has(Cap.UD)) {
      test('ib_send_lat -c UD -a: every size from 2 to the path MTU, in order', async () => {
        const r = await pair('ib_send_lat', [...dev, '-c', 'UD', '-a', '-n', '10']);
        assert.equal(r.cli.code, 0, r.both);
        assert.equal(r.srv.code, 0, r.both);
        const mtu = Number(/^ Mtu +: (\d+)\[B\]$/m.exec(r.cli.stdout)[1]);
        const sizes = r.cli.stdout.split('\n').filter((x) => LAT_ROW.test(x)).map((x) => Number(LAT_ROW.exec(x)[1]));
        const want = [];
        for (let s = 2; s <= mtu; s *= 2) want.push(s);
        assert.deepEqual(sizes, want, r.both);
      });
    }

    if (d.caps.has(Cap.UD)) {
      test('ib_send_bw -c UD: the default 64 KiB message cut to the path MTU with perftest\'s lines, a row on each side', async () => {
        const r = await pair('ib_send_bw', [...dev, '-c', 'UD', '-n', '200']);
        assert.equal(r.cli.code, 0, r.both);
        assert.equal(r.srv.code, 0, r.both);
        const mtu = Number(/^ Mtu +: (\d+)\[B\]$/m.exec(r.cli.stdout)[1]);
        for (const side of [r.cli, r.srv]) {
          assert.ok(side.stderr.includes(` Max msg size in UD is MTU ${mtu}\n Changing to this MTU\n`), r.both);
          const rows = side.stdout.split('\n').filter((x) => BW_ROW.test(x));
          assert.equal(rows.length, 1, r.both);
          assert.deepEqual(BW_ROW.exec(rows[0]).slice(1, 3), [String(mtu), '200'], r.both);
        }
      });
    }

    if (d.caps.has(Cap.UC)) {
      test('ib_write_bw -c UC --report_gbits: Gb/sec columns', async () => {
        const r = await pair('ib_write_bw', [...dev, '-c', 'UC', '-n', '200', '--report_gbits']);
        assert.equal(r.cli.code, 0, r.both);
        assert.equal(r.srv.code, 0, r.both);
        assert.ok(r.cli.stdout.includes(' Connection type : UC\t\t'), r.both);
        assert.ok(r.cli.stdout.includes(' #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n'), r.both);
      });
    }
  });
}
// -R: the side channel and the QPs made and connected by rdma_cm, on every device whose CM
// connects RDMA_PS_TCP ids (the only way perftest runs over iWARP). RDMACM_DEVICE pins the CM's
// ids to the device.
const cmDevices = testDevices().filter((d) => d.caps.has(Cap.RC) && d.caps.has(Cap.CM_TCP));
for (const d of cmDevices) {
  describe(`[${d.name}] perftest tools with -R`, () => {
    const env = { RDMACM_DEVICE: d.name };
    const dev = ['-d', d.name, '-R'];
    for (const [tool, args, row, title] of [
      ['ib_write_bw', ['-n', '300'], BW_ROW, 'RDMA_Write BW Test'],
      ['ib_send_lat', ['-n', '100'], LAT_ROW, 'Send Latency Test'],
      ['ib_read_lat', ['-n', '100'], LAT_ROW, 'RDMA_Read Latency Test'],
    ]) {
      test(`${tool} -R: rdma_cm QPs ON, exit 0/0, the rows`, async () => {
        const r = await pair(tool, [...dev, ...args], { env, roceCm: d.transportType === TransportType.IB });
        assert.equal(r.cli.code, 0, r.both);
        assert.equal(r.srv.code, 0, r.both);
        const l = checkBanner(r.cli.stdout, title, d.name).join('\n');
        assert.ok(l.includes(' rdma_cm QPs\t : ON\n Data ex. method : rdma_cm\n'), r.both);
        assert.ok(r.srv.stdout.includes(' Waiting for client rdma_cm QP to connect\n Please run the same command with the IB/RoCE interface IP\n'), r.both);
        checkAddresses(r.cli.stdout.split('\n'));
        assert.equal(r.cli.stdout.split('\n').filter((x) => row.test(x)).length, 1, r.both);
        assert.equal(r.srv.stdout.split('\n').filter((x) => row.test(x)).length, tool === 'ib_read_lat' ? 0 : 1, r.both);
      });
    }
    // -q 2: two rdma_cm connections on the one port, the client making the second once the first
    // is up and the server accepting each as it comes (cm.ts cmClient, cmServer).
    test('ib_write_bw -R -q 2 -n 200: two connections, exit 0/0, the row counts both QPs', async () => {
      const r = await pair('ib_write_bw', [...dev, '-q', '2', '-n', '200'], { env, roceCm: d.transportType === TransportType.IB });
      assert.equal(r.cli.code, 0, r.both);
      assert.equal(r.srv.code, 0, r.both);
      assert.ok(r.cli.stdout.includes(' Number of qps   : 2\t\tTransport type : '), r.both);
      for (const side of [r.cli, r.srv]) {
        const rows = side.stdout.split('\n').filter((x) => BW_ROW.test(x));
        assert.equal(rows.length, 1, r.both);
        assert.equal(BW_ROW.exec(rows[0])[2], '400', r.both);
      }
    });
    // send_bw.c over iWARP: the receiver writes its count into the sender's credit word every
    // rx_depth/3 messages and the sender stays within rx_depth of it. 64 SENDs in flight against
    // 8 receives would otherwise find none posted, which ends an iWARP connection.
    if (d.transportType === TransportType.IWARP) {
      test('ib_send_bw -R -n 400 -r 8 -t 64: the receiver\'s credits pace the sender, exit 0/0, a row each', async () => {
        const r = await pair('ib_send_bw', [...dev, '-n', '400', '-r', '8', '-t', '64'], { env });
        assert.equal(r.cli.code, 0, r.both);
        assert.equal(r.srv.code, 0, r.both);
        for (const side of [r.cli, r.srv]) {
          const rows = side.stdout.split('\n').filter((x) => BW_ROW.test(x));
          assert.equal(rows.length, 1, r.both);
          assert.equal(BW_ROW.exec(rows[0])[2], '400', r.both);
        }
        assert.ok(r.srv.stdout.includes(' RX depth        : 8\n'), r.both);
      });
    }
  });
}

// -R -c UD: the test's UD QPs on RDMA_PS_UDP ids, met by SIDR (cm-ud.ts); the latency test's
// server learns its peer from the client's first SEND (its QP number as immediate data).
const udCmDevices = testDevices().filter((d) => d.caps.has(Cap.UD) && d.caps.has(Cap.CM_UDP) && d.caps.has(Cap.CM_TCP));
for (const d of udCmDevices) {
  describe(`[${d.name}] perftest tools with -R -c UD`, () => {
    const env = { RDMACM_DEVICE: d.name };
    for (const [tool, args, row] of [
      ['ib_send_lat', ['-n', '20'], LAT_ROW],
      ['ib_send_bw', ['-n', '20'], BW_ROW],
    ]) {
      test(`${tool} -R -c UD: exit 0/0, UD in the banner, a row each`, async () => {
        const r = await pair(tool, ['-d', d.name, '-R', '-c', 'UD', ...args], { env, roceCm: d.transportType === TransportType.IB });
        assert.equal(r.cli.code, 0, r.both);
        assert.equal(r.srv.code, 0, r.both);
        assert.ok(r.cli.stdout.includes(' Connection type : UD\t\tUsing SRQ      : OFF\n'), r.both);
        assert.ok(r.cli.stdout.includes(' rdma_cm QPs\t : ON\n'), r.both);
        assert.equal(r.cli.stdout.split('\n').filter((x) => row.test(x)).length, 1, r.both);
        assert.equal(r.srv.stdout.split('\n').filter((x) => row.test(x)).length, 1, r.both);
      });
    }
  });
}

if (roceDevices.length === 0) describe('perftest tools: no device with RC QPs that connect by their keys', { skip: true }, () => {});

describe('perftest tools: bad input', () => {
  test('an unknown option: getopt\'s message, perftest\'s lines and usage, exit 1', async () => {
    const r = await runCli(cli('ib_write_bw'), ['-Z'], { env: ENV });
    assert.equal(r.code, 1, describeRun('ib_write_bw -Z', r));
    assert.equal(r.stderr, "ib_write_bw: invalid option -- 'Z'\n Invalid Command or flag.\n Please check command line and run again.\n\n Parser function exited with Error\n");
    assert.match(r.stdout, /^Usage:\n  ib_write_bw            start a server and wait for connection\n/);
  });

  test('values out of range and impossible connection types: perftest\'s messages, exit 1', async () => {
    const cases = [
      ['ib_send_lat', ['-n', '2'], ' Iteration num should be between 5 and 100000000\n'],
      ['ib_write_bw', ['-c', 'UD'], ' UD connection only possible in SEND verb\n'],
      ['ib_read_lat', ['-c', 'UC'], ' UC connection not possible in READ/ATOMIC verbs\n'],
      ['ib_write_bw', ['-t', 'x'], ' Tx depth argument x should be int\n'],
      ['ib_send_lat', ['-q', '2'], ' Multiple QPs only available on bw tests\n'],
      ['ib_read_bw', ['-I', '64'], ' Inline feature not available on READ/Atomic verbs\n'],
      ['ib_write_lat', ['-o', '4'], ' Setting Outstanding reads only available on READ verb\n'],
      ['ib_write_bw', ['-A', 'CMP_AND_SWAP'], ' You are not running the atomic_lat/bw test!\n To change the atomic action type, you must run one of the atomic tests\n'],
      ['ib_write_bw', ['--no-such'], "ib_write_bw: unrecognized option '--no-such'\n Invalid Command or flag.\n Please check command line and run again.\n\n"],
      ['ib_write_bw', ['-d', 'no_such_dev'], null],
    ];
    for (const [tool, args, msg] of cases) {
      const r = await runCli(cli(tool), args, { env: ENV });
      assert.equal(r.code, 1, describeRun(`${tool} ${args.join(' ')}`, r));
      if (msg !== null) assert.equal(r.stderr, `${msg} Parser function exited with Error\n`, describeRun(tool, r));
      else assert.equal(r.stderr, ' IB device no_such_dev not found\n Unable to find the Infiniband/RoCE device\n');
    }
  });

  test('-D with -a: perftest\'s refusal, exit 1', async () => {
    const r = await runCli(cli('ib_write_bw'), ['-D', '2', '-a'], { env: ENV });
    assert.equal(r.code, 1, describeRun('ib_write_bw -D 2 -a', r));
    assert.equal(r.stdout, `${LINE}\n`);
    assert.equal(r.stderr, "Duration mode currently doesn't support running on all sizes.\n");
  });

  test('an atomic test with another size: perftest\'s line on stdout, exit 1', async () => {
    const r = await runCli(cli('ib_atomic_bw'), ['-s', '16'], { env: ENV });
    assert.equal(r.code, 1, describeRun('ib_atomic_bw -s 16', r));
    assert.equal(r.stdout, `${LINE}\nMessage size cannot be changed for Atomic tests \n`);
    assert.equal(r.stderr, '');
  });

  test('--version prints perftest\'s version line (and exits 1, as perftest does)', async () => {
    const r = await runCli(cli('ib_send_bw'), ['--version'], { env: ENV });
    assert.equal(r.stdout, 'Version: 6.06\n');
    assert.equal(r.stderr, '');
    assert.equal(r.code, 1);
  });

  test('a server that is not there: perftest\'s lines, exit 1', async () => {
    const port = await freePort();
    const dev = roceDevices[0] ? ['-d', roceDevices[0].name] : [];
    const r = await runCli(cli('ib_write_bw'), [...dev, '-p', String(port), '127.0.0.1'], { env: ENV, timeoutMs: 30_000 });
    assert.equal(r.code, 1, describeRun('client', r));
    assert.equal(r.stderr, `Couldn't connect to 127.0.0.1:${port}\nUnable to open file descriptor for socket connection Unable to init the socket connection\n`);
  });

  test('a peer that sends garbage for its keys, or leaves mid-exchange: a clear error and exit 1, no hang', { skip: roceDevices.length === 0 }, async () => {
    for (const script of ['garbage', 'leave', 'old']) {
      const port = await freePort();
      const srv = net.createServer((s) => {
        s.on('error', () => {});
        let got = 0;
        s.on('data', (b) => {
          got += b.length;
          // The client writes first: version (16), cycle buffer (4), cache line (4), MTU (2), keys.
          if (got === 16) {
            const v = Buffer.alloc(16);
            v.write(script === 'old' ? '5.60' : '6.06');
            s.write(v);
          } else if (got === 20 || got === 24) s.write(Buffer.from([0, 0, 0x10, 0]));
          else if (got === 26) s.write(Buffer.from('5\0'));
          else if (got >= 26 + 108) {
            if (script === 'garbage') s.end(Buffer.alloc(108, 'z'));
            else s.destroy();
          }
        });
      });
      await new Promise((r) => srv.listen(port, '127.0.0.1', r));
      try {
        const r = await runCli(cli('ib_write_bw'), ['-d', roceDevices[0].name, '-p', String(port), '127.0.0.1'], { env: ENV, timeoutMs: 30_000 });
        assert.equal(r.code, 1, describeRun(script, r));
        if (script === 'garbage') assert.match(r.stderr, /^Couldn't parse line <z{108}>\n Failed to exchange data between server and clients\n$/);
        else if (script === 'old') assert.equal(r.stderr, 'Current implementation is not compatible with versions older than 5.70\n');
        else assert.match(r.stderr, /Failed to exchange data between server and clients/);
      } finally {
        srv.close();
      }
    }
  });
});
