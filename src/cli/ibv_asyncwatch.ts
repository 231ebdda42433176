#!/usr/bin/env node
/**
 * ibv_asyncwatch: libibverbs' asyncwatch example (libibverbs/examples/asyncwatch.c) — open a
 * device (`-d`, default the first) and print each asynchronous event of its context until killed:
 * `<device>: async event FD <fd>`, then `  event_type <name> (<n>), port <port>` per event, with
 * rdma-core's names for the port and device events and "unexpected" for the others. The FD is the
 * context's `async_fd` on a native device; the soft devices deliver their events without a file
 * descriptor (FD -1), their port events as their interface goes down and up (docs/events.md).
 * docs/man/ibv_asyncwatch.1.md.
 */
import './startup.js';
import { AsyncEventType, getDeviceList, native } from '../index.js';
import { errOut, out, progName, runMain } from './c-compat.js';
import { parseOptions } from './getopt.js';

/** `event_name_str`: the events asyncwatch names; every other one is "unexpected". */
const EVENT_NAMES: Readonly<Record<number, string>> = {
  [AsyncEventType.DEVICE_FATAL]: 'IBV_EVENT_DEVICE_FATAL',
  [AsyncEventType.PORT_ACTIVE]: 'IBV_EVENT_PORT_ACTIVE',
  [AsyncEventType.PORT_ERR]: 'IBV_EVENT_PORT_ERR',
  [AsyncEventType.LID_CHANGE]: 'IBV_EVENT_LID_CHANGE',
  [AsyncEventType.PKEY_CHANGE]: 'IBV_EVENT_PKEY_CHANGE',
  [AsyncEventType.SM_CHANGE]: 'IBV_EVENT_SM_CHANGE',
  [AsyncEventType.CLIENT_REREGISTER]: 'IBV_EVENT_CLIENT_REREGISTER',
  [AsyncEventType.GID_CHANGE]: 'IBV_EVENT_GID_CHANGE',
};

function usage(argv0: string): void {
  out(`Usage:\n  ${argv0}            start an asyncwatch process\n\nOptions:\n`);
  out('  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n');
  out('  -h, --help             print a help text and exit\n');
}

runMain('ibv_asyncwatch', async (argv) => {
  const argv0 = progName('ibv_asyncwatch');
  let devName: string | null = null;
  let help = false;
  const LONG = [
    { name: 'ib-dev', hasArg: true, val: 'd' },
    { name: 'help', hasArg: false, val: 'h' },
  ];
  const operands = parseOptions(argv0, argv, 'd:h', LONG, (o) => {
    if (o.opt === 'd') {
      devName = o.optarg ?? '';
      return true;
    }
    help = o.opt === 'h';
    return false;
  });
  if (operands === null) {
    usage(argv0);
    return help ? 0 : 1;
  }
  const list = getDeviceList();
  const dev = devName === null ? list[0] : list.find((d) => d.name === devName);
  if (dev === undefined) {
    errOut(`IB device ${devName ?? ''} not found\n`);
    return 1;
  }
  let ctx;
  try {
    ctx = dev.open();
  } catch {
    errOut(`Couldn't get context for ${dev.name}\n`);
    return 1;
  }
  out(`${dev.name}: async event FD ${dev.provider === native.PROVIDER ? native.asyncFd(dev.name) : -1}\n`);
  // Waiting for an event holds no handle of the event loop: keep the process up, as the C tool's
  // blocking read does, until it is killed.
  setInterval(() => {}, 1 << 30);
  for (;;) {
    let ev;
    try {
      ev = await ctx.getAsyncEvent();
    } catch {
      return 1;
    }
    out(`  event_type ${EVENT_NAMES[ev.type] ?? 'unexpected'} (${ev.type}), port ${ev.portNum ?? 0}\n`);
    ctx.ackAsyncEvent(ev);
  }
});
