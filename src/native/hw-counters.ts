/**
 * A kernel RDMA device's hw counters, as `rdma statistic show link DEV/PORT` lists them: the
 * files of /sys/class/infiniband/DEV/ports/PORT/hw_counters (the kernel's `rdma_hw_stats` of the
 * port, one value per file; rdma-core's tool reads the same values over netlink).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { err } from '../errors.js';

/** Where the kernel publishes its RDMA devices. */
const SYSFS_IB = '/sys/class/infiniband';

/**
 * The hw counters of port `portNum` of kernel device `name`, by name.
 * @throws RdmaError EOPNOTSUPP when the device publishes none (a driver without hw stats).
 */
export function kernelHwCounters(name: string, portNum: number): Record<string, number> {
  const dir = `${SYSFS_IB}/${name}/ports/${portNum}/hw_counters`;
  let files: string[];
  try {
    files = readdirSync(dir);
  } catch {
    throw err('EOPNOTSUPP', 'rdma_statistic', `${name} has no hw counters`);
  }
  const out: Record<string, number> = {};
  for (const f of files.sort()) {
    if (f === 'lifespan') continue; // the refresh interval, not a counter
    try {
      const v = Number(readFileSync(`${dir}/${f}`, 'utf8').trim());
      if (Number.isFinite(v)) out[f] = v;
    } catch {
      // a counter the driver cannot read now is left out, as rdma-core's tool skips it
    }
  }
  return out;
}
