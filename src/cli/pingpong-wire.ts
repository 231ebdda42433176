/**
 * The side channel of libibverbs' pingpong examples (libibverbs/examples/pingpong.c and the
 * `pp_*_exch_dest` functions of rc/uc/ud/srq_pingpong.c), as bytes: each side writes one
 * fixed-size message `"%04x:%06x:%06x:%s"` — LID, QP number, PSN and the GID as 32 hex digits
 * (`gid_to_wire_gid`) — followed by its NUL, padded to the size of
 * `"0000:000000:000000:00000000000000000000000000000000"` (52 bytes). srq_pingpong sends one such
 * message per QP. The client ends with `"done"` and its NUL (5 bytes).
 *
 * Pure: no sockets. The parser is stricter than the C tools' `sscanf("%x:%x:%x:%s")`, which leaves
 * its fields unset on garbage: a message that is not four hex fields gets `null`, and the tool
 * reports it and exits instead of connecting to whatever memory held.
 */

/** `sizeof "0000:000000:000000:00000000000000000000000000000000"`: one message, NUL included. */
export const PP_MSG_LEN = 52;
/** `sizeof "done"`: the client's last message, NUL included. */
export const PP_DONE_LEN = 5;
/** The client's last message. */
export const PP_DONE = Buffer.from('done\0', 'latin1');
/** The examples' default TCP port (`-p`). */
export const PP_DEFAULT_PORT = 18515;

/** `struct pingpong_dest`: one side's address. */
export interface PpDest {
  /** The port's LID (0 on Ethernet link layers). */
  lid: number;
  /** The QP number (24 bits). */
  qpn: number;
  /** The first PSN (24 bits). */
  psn: number;
  /** The GID (16 bytes; all zero without `-g`). */
  gid: Uint8Array;
}

/** `gid_to_wire_gid`: the GID's 16 bytes as 32 lower-case hex digits, in order. */
export function gidToWire(gid: Uint8Array): string {
  return Buffer.from(gid.subarray(0, 16)).toString('hex').padEnd(32, '0');
}

/**
 * `wire_gid_to_gid`: 32 hex digits to 16 bytes (four big-endian words of eight digits each).
 * @returns null unless `s` is exactly 32 hex digits.
 */
export function wireToGid(s: string): Uint8Array | null {
  if (!/^[0-9a-fA-F]{32}$/.test(s)) return null;
  return Uint8Array.from(Buffer.from(s, 'hex'));
}

/** The message for `d`: the text, its NUL, and zeros up to {@link PP_MSG_LEN} bytes. */
export function encodeDest(d: PpDest): Buffer {
  const hex = (v: number, w: number): string => (v >>> 0).toString(16).padStart(w, '0');
  const text = `${hex(d.lid, 4)}:${hex(d.qpn, 6)}:${hex(d.psn, 6)}:${gidToWire(d.gid)}`;
  const b = Buffer.alloc(PP_MSG_LEN);
  b.write(text.slice(0, PP_MSG_LEN - 1), 'latin1');
  return b;
}

/** Largest value of a 16-bit LID. */
const LID_MAX = 0xffff;
/** Largest 24-bit QP number or PSN. */
const U24_MAX = 0xff_ffff;

/**
 * Parse one peer message (the text up to its first NUL, or all of it).
 * @returns the address, or null when it is not `LID:QPN:PSN:GID` with a 16-bit LID, a 24-bit
 *   QPN and PSN (hex, as the C tools print them) and a 32-digit GID.
 */
export function decodeDest(msg: Uint8Array): PpDest | null {
  const b = Buffer.from(msg.buffer, msg.byteOffset, msg.byteLength);
  const nul = b.indexOf(0);
  const text = b.toString('latin1', 0, nul < 0 ? b.length : nul);
  const m = /^([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,8}):([0-9a-fA-F]{32})$/.exec(text);
  if (m === null) return null;
  const lid = parseInt(m[1] as string, 16);
  const qpn = parseInt(m[2] as string, 16);
  const psn = parseInt(m[3] as string, 16);
  const gid = wireToGid(m[4] as string);
  if (gid === null || lid > LID_MAX || qpn > U24_MAX || psn > U24_MAX) return null;
  return { lid, qpn, psn, gid };
}

/** `pp_mtu_to_enum`: the `-m` value in bytes to `enum ibv_mtu` (0 for anything else). */
export function ppMtuToEnum(mtu: number): number {
  const e = [256, 512, 1024, 2048, 4096].indexOf(mtu);
  return e < 0 ? 0 : e + 1;
}

/** Whether the GID's interface id (its last 8 bytes) is non-zero: the C tools then use a GRH. */
export function gidHasInterfaceId(gid: Uint8Array): boolean {
  return gid.subarray(8, 16).some((x) => x !== 0);
}
