// The mckey tool's tests that carry data (multicast between processes through the soft RoCE
// device's group sockets, and between two hosts on a veth pair where the runner can make one)
// again under the UDP I/O path this run does not use (test/lib/io-paths.js).
import { test } from 'node:test';
import { otherPath, otherPathSkip, suitesUnderOtherPath } from '../lib/io-paths.js';

test(`mckey's data tests pass under RDMACM_ROCE_IO=${otherPath}`, { skip: otherPathSkip, timeout: 115_000 }, () => {
  suitesUnderOtherPath(['test/e2e/mckey.test.js'], 110_000, '^(one sender|-c 2|-o:|-l )');
});
