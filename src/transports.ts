/**
 * The built-in transports, loaded (and so registered with the verbs provider registry and the
 * CM transport registry) by importing this module — what linking libibverbs with its providers
 * installed does. The package entry points import it; the verbs and CM layers never do.
 * A new transport adds one line here.
 */
import './transport/iwarp/index.js';
import './transport/roce/index.js';
import './native/index.js';
