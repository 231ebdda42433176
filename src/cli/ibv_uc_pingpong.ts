#!/usr/bin/env node
/**
 * ibv_uc_pingpong: libibverbs' uc_pingpong example — a ping-pong of SENDs over one UC QP per
 * side, the two sides trading LID, QPN, PSN and GID over TCP (port 18515) in rdma-core's text
 * format, so that it meets rdma-core's own build. Options, output and exit statuses are the C
 * tool's (docs/man/ibv_uc_pingpong.1.md).
 */
import './startup.js';
import '../index.js';
import { runMain } from './c-compat.js';
import { UC_KIND, connPingpong } from './pingpong-conn.js';

runMain(UC_KIND.name, (argv) => connPingpong(UC_KIND, argv));
