#!/usr/bin/env node
/**
 * ib_send_lat: perftest's ib_send_lat (linux-rdma/perftest, src/send_lat.c) over this package's verbs — its
 * options, side channel, output and exit status; the run itself is in perftest/main.ts.
 */
import './startup.js';
import '../index.js';
import { progName, runMain } from './c-compat.js';
import { Test, Verb } from './perftest/params.js';
import { perftestMain } from './perftest/main.js';

runMain('ib_send_lat', (argv) => perftestMain(progName('ib_send_lat'), Verb.SEND, Test.LAT, argv));
