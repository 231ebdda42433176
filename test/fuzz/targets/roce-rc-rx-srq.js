// roce-rc-rx with the QP's receives on a shared receive queue (see roce-rc-rx.js): the same
// invariants — above all, every receive completes at most once, the SRQ's untaken ones surviving
// the QP's trips through ERR.
import { rcRxTarget } from './roce-rc-rx.js';

export default rcRxTarget(true);
