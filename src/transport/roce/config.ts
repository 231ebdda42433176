/**
 * Tunables of the soft RoCE devices themselves (the CM's are in cm/config.ts): process-wide
 * defaults from the environment and per-device overrides by device name (`rxe_lo`, `rxe_eth0`).
 * The package exports them as `roce.configureDevice` and `roce.deviceConfig` (settings.ts).
 */
import { err } from '../../errors.js';
import { envNumber } from '../../util/env.js';
import { DEFAULT_PORT_POLL_MS } from '../../verbs/port-watch.js';

/** Tunables of a soft RoCE device. */
export interface RoceDeviceConfig {
  /**
   * How often the device's interface is looked at while something listens to its port (an
   * async event reader, a QP, a CM id): its state, addresses and hardware address (ms, ≥ 1; see
   * docs/design/port-events.md). Default 1000, `RDMACM_PORT_POLL_MS`.
   */
  portPollMs: number;
}

let defaults: RoceDeviceConfig | null = null;
const perDevice = new Map<string, Partial<RoceDeviceConfig>>();

function base(): RoceDeviceConfig {
  return (defaults ??= { portPollMs: Math.max(1, envNumber('RDMACM_PORT_POLL_MS', DEFAULT_PORT_POLL_MS)) });
}

/** The configuration of device `device` (its overrides over the defaults), or the defaults. */
export function roceDeviceConfig(device?: string): RoceDeviceConfig {
  const d = device === undefined ? undefined : perDevice.get(device);
  return { ...base(), ...(d ?? {}) };
}

/**
 * Change soft RoCE device tunables: for every device (no `device`), or for the device of that
 * name (its overrides win). A watch already running picks the new interval at its next change.
 * @throws RdmaError EINVAL for an unknown key or a bad value.
 */
export function configureRoceDevice(patch: Partial<RoceDeviceConfig>, device?: string): void {
  for (const [k, v] of Object.entries(patch)) {
    if (k !== 'portPollMs' || typeof v !== 'number' || !Number.isFinite(v) || v < 1) throw err('EINVAL', 'configureRoceDevice', `${k}: ${String(v)}`);
  }
  if (device === undefined) defaults = { ...base(), ...patch };
  else perDevice.set(device, { ...(perDevice.get(device) ?? {}), ...patch });
}
