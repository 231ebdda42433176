// ibv_devinfo output compared field by field: each non-blank line becomes {key, value}, the key
// carrying the line's depth of tabs, so layout and values are both compared.
import assert from 'node:assert/strict';

/** `ibv_devinfo` text as `[{ key, value }]`, one per non-blank line. */
export function devinfoFields(text) {
  return text.split('\n').filter((l) => l.trim() !== '').map((l) => {
    const m = /^(\t*)([^\t:]+(?:\[\s*\d+\])?):?\t*(.*)$/.exec(l);
    return m ? { key: `${m[1].length}:${m[2]}`, value: m[3] } : { key: l, value: '' };
  });
}

/**
 * Assert two `ibv_devinfo` outputs hold the same lines in the same order, except those whose key
 * matches one of `skip` (regular expressions over `<depth>:<name>` keys).
 */
export function assertSameFields(ours, theirs, skip, what) {
  const keep = (f) => !skip.some((re) => re.test(f.key));
  assert.deepEqual(devinfoFields(ours).filter(keep), devinfoFields(theirs).filter(keep), `${what}\n--- ours\n${ours}\n--- expected\n${theirs}`);
}

/** Lines of the machine rather than of the device type: names, GUIDs, GIDs, comp vectors. */
export const MACHINE_FIELDS = [/^0:hca_id/, /node_guid/, /sys_image_guid/, /^3:GID\[/, /num_comp_vectors/];

/**
 * `IB_DEVICE_BLOCK_MULTICAST_LOOPBACK` (1 << 22): the one capability our soft RoCE device has
 * beyond Linux rxe's (it honours IBV_QP_CREATE_BLOCK_SELF_MCAST_LB; src/transport/roce/params.ts).
 */
export const SOFT_ROCE_EXTRA_CAP = 1 << 22;

/**
 * The kernel's rxe `ibv_devinfo -v` text with our soft RoCE device's documented difference applied:
 * SOFT_ROCE_EXTRA_CAP set in device_cap_flags and device_cap_flags_ex, and — rdma-core 44 has no
 * name for that bit — reported on the `Unknown flags` line after the named flags. Throws when the
 * text lacks either line.
 */
export function withSoftRoceCaps(kernelRxe) {
  const lines = kernelRxe.split('\n');
  const at = lines.findIndex((l) => /^\tdevice_cap_flags:\t\t0x[0-9a-f]{8}$/.test(l));
  const ex = lines.findIndex((l) => /^\tdevice_cap_flags_ex:\t\t0x[0-9A-F]+$/.test(l));
  assert.ok(at >= 0 && ex >= 0, `device_cap_flags and device_cap_flags_ex lines in\n${kernelRxe}`);
  const flags = (Number.parseInt(lines[at].split('0x')[1], 16) | SOFT_ROCE_EXTRA_CAP) >>> 0;
  lines[at] = `\tdevice_cap_flags:\t\t0x${flags.toString(16).padStart(8, '0')}`;
  lines[ex] = `\tdevice_cap_flags_ex:\t\t0x${(BigInt(`0x${lines[ex].split('0x')[1]}`) | BigInt(SOFT_ROCE_EXTRA_CAP)).toString(16).toUpperCase()}`;
  // The named flags are the lines of five tabs after device_cap_flags; an Unknown line ends them.
  let end = at + 1;
  while (end < lines.length && lines[end].startsWith('\t\t\t\t\t')) end++;
  const last = lines[end - 1];
  const m = /^\t\t\t\t\tUnknown flags: 0x([0-9A-F]+)$/.exec(last);
  const unknown = ((m ? Number.parseInt(m[1], 16) : 0) | SOFT_ROCE_EXTRA_CAP) >>> 0;
  const line = `\t\t\t\t\tUnknown flags: 0x${unknown.toString(16).toUpperCase()}`;
  if (m) lines[end - 1] = line;
  else lines.splice(end, 0, line);
  return lines.join('\n');
}
