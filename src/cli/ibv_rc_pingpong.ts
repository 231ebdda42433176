#!/usr/bin/env node
/**
 * ibv_rc_pingpong: libibverbs' rc_pingpong example — a ping-pong of SENDs over one RC QP per
 * side, the two sides trading LID, QPN, PSN and GID over TCP (port 18515) in rdma-core's text
 * format, so that it meets rdma-core's own build. Options, output and exit statuses are the C
 * tool's (docs/man/ibv_rc_pingpong.1.md).
 */
import './startup.js';
import '../index.js';
import { runMain } from './c-compat.js';
import { RC_KIND, connPingpong } from './pingpong-conn.js';

runMain(RC_KIND.name, (argv) => connPingpong(RC_KIND, argv));
