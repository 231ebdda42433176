/**
 * Tunables of the software iWARP device, as typed configuration: process-wide defaults, and
 * per-device overrides by device name (`siw_lo`, `siw_eth0`). An environment variable sets each
 * default; it is read when the configuration is first used, not when the module loads. See
 * docs/config.md for the table. The package exports it as `iwarp.configure` and `iwarp.config`
 * (settings.ts).
 */
import { existsSync } from 'node:fs';
import { err } from '../../errors.js';
import { envNumber } from '../../util/env.js';
import { DEFAULT_PORT_POLL_MS } from '../../verbs/port-watch.js';

/** The iWARP tunables. */
export interface IwarpConfig {
  /**
   * Ask for MPA CRC as initiator (siw's `mpa_crc_required` is off; a peer may still ask).
   * Default: `RDMACM_IWARP_CRC=1` turns it on.
   */
  crc: boolean;
  /**
   * Request peer-to-peer mode (RFC 6581: the initiator sends a zero-length RTR first) as
   * initiator. Default on; `RDMACM_IWARP_P2P=0` turns it off.
   */
  p2p: boolean;
  /**
   * A non-P2P responder holds its first FPDU until the initiator's arrives (RFC 5044: the
   * initiator speaks first) or this grace period passes (ms). Default 200,
   * `RDMACM_IWARP_HOLD_MS`.
   */
  holdGraceMs: number;
  /**
   * After our Write RTR, with nothing received, another zero-length Write is sent after this
   * many ms, then after 4, 16 and 64 times it (0: never); works around Linux siw's P2P responder
   * race. Default 50, `RDMACM_IWARP_RTR_NUDGE_MS`.
   */
  rtrNudgeMs: number;
  /**
   * Whether peers on this host (loopback or a local address) get the RTR nudges: `'auto'` —
   * only when this kernel has the siw module (only a kernel siw has the race); or a fixed
   * answer. Default `'auto'`, `RDMACM_IWARP_RTR_NUDGE_LOOPBACK=1|0`.
   */
  rtrNudgeLocal: boolean | 'auto';
  /** How long the initiator waits for the MPA Reply (ms; siw: 10 s). `RDMACM_MPA_REPLY_TIMEOUT_MS`. */
  mpaReplyTimeoutMs: number;
  /**
   * How long an accepted connection waits for the MPA Request (ms; siw: 5 s): a connection that
   * has not sent a whole Request by then is closed, so half-open connections cannot pile up.
   * `RDMACM_MPA_REQUEST_TIMEOUT_MS`.
   */
  mpaRequestTimeoutMs: number;
  /**
   * Tagged payloads at least this large are read by the socket straight into the target MR
   * (direct placement); `Infinity` turns it off. Default 8192; `RDMACM_IWARP_DIRECT=0` turns it
   * off.
   */
  directPlacementMin: number;
  /**
   * Decode and place whole small Writes and Sends that arrive complete in one read in one step
   * (the receive fast path), leaving everything else to the general FPDU decoder. Default on;
   * `RDMACM_IWARP_RX_FAST=0` turns it off (every FPDU then goes through the decoder).
   */
  rxFastPath: boolean;
  /**
   * How often the device's interface is looked at while something listens to its port (an
   * async event reader, a QP, a CM id): up or down, addresses, hardware address (ms, ≥ 1; see
   * docs/design/port-events.md). Default 1000, `RDMACM_PORT_POLL_MS`.
   */
  portPollMs: number;
}

/** The configuration as used: {@link IwarpConfig} plus derived answers. */
export interface ResolvedIwarpConfig extends Readonly<IwarpConfig> {
  /** {@link IwarpConfig.rtrNudgeLocal} resolved (`'auto'`: whether /sys/module/siw exists). */
  nudgeLocalPeers(): boolean;
}

let localSiw: boolean | null = null;

/** The defaults, from the environment. */
function fromEnv(): IwarpConfig {
  const nl = process.env['RDMACM_IWARP_RTR_NUDGE_LOOPBACK'];
  return {
    crc: process.env['RDMACM_IWARP_CRC'] === '1',
    p2p: process.env['RDMACM_IWARP_P2P'] !== '0',
    holdGraceMs: envNumber('RDMACM_IWARP_HOLD_MS', 200),
    rtrNudgeMs: envNumber('RDMACM_IWARP_RTR_NUDGE_MS', 50),
    rtrNudgeLocal: nl === '1' ? true : nl === '0' ? false : 'auto',
    mpaReplyTimeoutMs: envNumber('RDMACM_MPA_REPLY_TIMEOUT_MS', 10_000),
    mpaRequestTimeoutMs: envNumber('RDMACM_MPA_REQUEST_TIMEOUT_MS', 5_000),
    directPlacementMin: process.env['RDMACM_IWARP_DIRECT'] === '0' ? Infinity : 8192,
    rxFastPath: process.env['RDMACM_IWARP_RX_FAST'] !== '0',
    portPollMs: Math.max(1, envNumber('RDMACM_PORT_POLL_MS', DEFAULT_PORT_POLL_MS)),
  };
}

function resolve(c: IwarpConfig): ResolvedIwarpConfig {
  return Object.freeze({
    ...c,
    nudgeLocalPeers: (): boolean => (c.rtrNudgeLocal === 'auto' ? (localSiw ??= existsSync('/sys/module/siw')) : c.rtrNudgeLocal),
  });
}

let defaults: IwarpConfig | null = null;
let resolvedDefaults: ResolvedIwarpConfig | null = null;
const perDevice = new Map<string, { patch: Partial<IwarpConfig>; resolved: ResolvedIwarpConfig | null }>();

function base(): IwarpConfig {
  return (defaults ??= fromEnv());
}

/**
 * The configuration of iWARP device `device` (its overrides over the defaults), or the defaults.
 * Cheap: resolved objects are cached until the next {@link configureIwarp}.
 */
export function iwarpConfig(device?: string): ResolvedIwarpConfig {
  if (device !== undefined) {
    const d = perDevice.get(device);
    if (d !== undefined) return (d.resolved ??= resolve({ ...base(), ...d.patch }));
  }
  return (resolvedDefaults ??= resolve(base()));
}

const KEYS: Readonly<Record<keyof IwarpConfig, 'boolean' | 'number' | 'nudge'>> = {
  crc: 'boolean',
  p2p: 'boolean',
  holdGraceMs: 'number',
  rtrNudgeMs: 'number',
  rtrNudgeLocal: 'nudge',
  mpaReplyTimeoutMs: 'number',
  mpaRequestTimeoutMs: 'number',
  directPlacementMin: 'number',
  rxFastPath: 'boolean',
  portPollMs: 'number',
};

/**
 * Change iWARP tunables: for every device (no `device`), or for the device of that name (its
 * overrides win over the defaults). Connections already set up keep what they were made with.
 * @throws RdmaError EINVAL for an unknown key or a value of the wrong type (numbers: ≥ 0).
 */
export function configureIwarp(patch: Partial<IwarpConfig>, device?: string): void {
  for (const [k, v] of Object.entries(patch)) {
    const kind = KEYS[k as keyof IwarpConfig];
    const ok =
      kind === 'boolean' ? typeof v === 'boolean' : kind === 'number' ? typeof v === 'number' && v >= 0 && !Number.isNaN(v) : kind === 'nudge' ? v === 'auto' || typeof v === 'boolean' : false;
    if (!ok || (k === 'portPollMs' && (v as number) < 1)) throw err('EINVAL', 'configureIwarp', `${k}: ${String(v)}`);
  }
  if (device === undefined) {
    defaults = { ...base(), ...patch };
    resolvedDefaults = null;
    for (const d of perDevice.values()) d.resolved = null;
    return;
  }
  const d = perDevice.get(device);
  perDevice.set(device, { patch: { ...(d?.patch ?? {}), ...patch }, resolved: null });
}

/** Forget every override and re-read the environment on next use (for tests). */
export function resetIwarpConfig(): void {
  defaults = null;
  resolvedDefaults = null;
  perDevice.clear();
}
