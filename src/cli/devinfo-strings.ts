/**
 * The names ibv_devinfo prints for attribute values (libibverbs/examples/devinfo.c
 * `transport_str`, `port_state_str`, `mtu_str` …, and `print_device_cap_flags`' bit names):
 * tables, each with the C tool's text for a value it does not know.
 */

/** `print_device_cap_flags`: `IBV_DEVICE_*` bits and their names, in the C tool's order. */
export const DEVICE_CAP_FLAGS: readonly (readonly [number, string])[] = Object.freeze([
  [1 << 0, 'RESIZE_MAX_WR'],
  [1 << 1, 'BAD_PKEY_CNTR'],
  [1 << 2, 'BAD_QKEY_CNTR'],
  [1 << 3, 'RAW_MULTI'],
  [1 << 4, 'AUTO_PATH_MIG'],
  [1 << 5, 'CHANGE_PHY_PORT'],
  [1 << 6, 'UD_AV_PORT_ENFORCE'],
  [1 << 7, 'CURR_QP_STATE_MOD'],
  [1 << 8, 'SHUTDOWN_PORT'],
  [1 << 9, 'INIT_TYPE'],
  [1 << 10, 'PORT_ACTIVE_EVENT'],
  [1 << 11, 'SYS_IMAGE_GUID'],
  [1 << 12, 'RC_RNR_NAK_GEN'],
  [1 << 13, 'SRQ_RESIZE'],
  [1 << 14, 'N_NOTIFY_CQ'],
  [1 << 17, 'MEM_WINDOW'],
  [1 << 18, 'UD_IP_CSUM'],
  [1 << 20, 'XRC'],
  [1 << 21, 'MEM_MGT_EXTENSIONS'],
  [1 << 23, 'MEM_WINDOW_TYPE_2A'],
  [1 << 24, 'MEM_WINDOW_TYPE_2B'],
  [1 << 25, 'RC_IP_CSUM'],
  [1 << 26, 'RAW_IP_CSUM'],
  [1 << 29, 'MANAGED_FLOW_STEERING'],
] as const);

const lookup = (table: Readonly<Record<number, string>>, other: string) => (v: number): string => table[v] ?? other;

/** `transport_str`. */
export const transportStr = lookup({ 0: 'InfiniBand', 1: 'iWARP', 2: 'usNIC', 3: 'usNIC UDP', 4: 'unspecified' }, 'invalid transport');
/** `port_state_str`. */
export const portStateStr = lookup({ 1: 'PORT_DOWN', 2: 'PORT_INIT', 3: 'PORT_ARMED', 4: 'PORT_ACTIVE' }, 'invalid state');
/** `port_phy_state_str`. */
export const portPhyStateStr = lookup(
  { 1: 'SLEEP', 2: 'POLLING', 3: 'DISABLED', 4: 'PORT_CONFIGURATION TRAINNING', 5: 'LINK_UP', 6: 'LINK_ERROR_RECOVERY', 7: 'PHY TEST' },
  'invalid physical state',
);
/** `atomic_cap_str`. */
export const atomicCapStr = lookup({ 0: 'ATOMIC_NONE', 1: 'ATOMIC_HCA', 2: 'ATOMIC_GLOB' }, 'invalid atomic capability');
/** `mtu_str`. */
export const mtuStr = lookup({ 1: '256', 2: '512', 3: '1024', 4: '2048', 5: '4096' }, 'invalid MTU');
/** `width_str`. */
export const widthStr = lookup({ 1: '1', 2: '4', 4: '8', 8: '12', 16: '2' }, 'invalid width');
/** `speed_str`. */
export const speedStr = lookup(
  { 1: '2.5 Gbps', 2: '5.0 Gbps', 4: '10.0 Gbps', 8: '10.0 Gbps', 16: '14.0 Gbps', 32: '25.0 Gbps', 64: '50.0 Gbps', 128: '100.0 Gbps' },
  'invalid speed',
);
/** `vl_str`. */
export const vlStr = lookup({ 1: '1', 2: '2', 3: '4', 4: '8', 5: '15' }, 'invalid value');
/** `link_layer_str`. */
export const linkLayerStr = lookup({ 0: 'Unspecified', 1: 'InfiniBand', 2: 'Ethernet' }, 'Unknown');
