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
