#!/usr/bin/env node
/**
 * ib_send_bw: perftest's ib_send_bw (linux-rdma/perftest, src/send_bw.c) over this package's verbs — its
 * options, side channel, output and exit status; the run itself is in perftest/main.ts.
 */
import './startup.js';
import '../index.js';
import { progName, runMain } from './c-compat.js';
import { Test, Verb } from './perftest/params.js';
import { perftestMain } from './perftest/main.js';

runMain('ib_send_bw', (argv) => perftestMain(progName('ib_send_bw'), Verb.SEND, Test.BW, argv));
