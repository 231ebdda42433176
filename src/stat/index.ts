/**
 * The counter and resource listing: this process's resources (`listResources`), the kernel's
 * (`kernelResources`), and the reports of this host's processes (`readProcesses`) that each
 * process using a soft device serves on `@rdmacm-stat/<pid>` (service.ts, loaded here).
 */
import './service.js';
export { listResources, kernelResources, accessNames, RESOURCE_KINDS, type ResourceKind, type ResourceRecord, type Resources } from './resources.js';
export { statReport, statServiceListening } from './service.js';
export { readProcesses, readProcess, statPids, type ProcessScan, type SkippedProcess } from './client.js';
export { STAT_VERSION, statSocketName, type StatReport, type DeviceReport } from './protocol.js';
