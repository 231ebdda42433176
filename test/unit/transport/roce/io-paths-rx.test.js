// The suites that send hostile and malformed datagrams at the soft RoCE device's sockets (the
// hostile sender, the RC hostile peer, SIDR from a raw peer, the UDP endpoints) and the fuzz
// targets of its receive path, again under the UDP I/O path this run does not use (test/lib/io-paths.js).
import { test } from 'node:test';
import { otherPath, otherPathSkip, suitesUnderOtherPath, fuzzUnderOtherPath } from '../../../lib/io-paths.js';

test(`the hostile and receive-path suites pass under RDMACM_ROCE_IO=${otherPath}`, { skip: otherPathSkip, timeout: 100_000 }, () => {
  suitesUnderOtherPath(
    ['test/unit/transport/roce/udp-io.test.js', 'test/unit/transport/roce/hostile-sender.test.js', 'test/unit/transport/roce/rc-hostile.test.js', 'test/unit/transport/roce/cm/ud.test.js'],
    95_000,
  );
});

test(`the fuzz targets of the RoCE receive path pass under RDMACM_ROCE_IO=${otherPath}`, { skip: otherPathSkip, timeout: 60_000 }, () => {
  fuzzUnderOtherPath(['roce-udp-batch', 'roce-rx', 'roce-rc-rx', 'roce-cm-rx', 'roce-packet'], 1, 55_000);
});
