// The suites that use the soft RoCE device's sockets for multicast, IPv4 identification, link
// impairment and several processes on one port, again under the UDP I/O path this run does not
// use (test/lib/io-paths.js).
import { test } from 'node:test';
import { otherPath, otherPathSkip, suitesUnderOtherPath } from '../../../lib/io-paths.js';

test(`the multicast, IP ID, impairment and shared-port suites pass under RDMACM_ROCE_IO=${otherPath}`, { skip: otherPathSkip, timeout: 110_000 }, () => {
  suitesUnderOtherPath(
    [
      'test/unit/transport/roce/mcast-attach.test.js',
      'test/unit/transport/roce/ipid.test.js',
      'test/unit/transport/roce/impair.test.js',
      'test/unit/transport/roce/multiprocess.test.js',
    ],
    105_000,
  );
});
