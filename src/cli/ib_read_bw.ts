#!/usr/bin/env node
/**
 * ib_read_bw: perftest's ib_read_bw (linux-rdma/perftest, src/read_bw.c) over this package's verbs — its
 * options, side channel, output and exit status; the run itself is in perftest/main.ts.
 */
import './startup.js';
import '../index.js';
import { progName, runMain } from './c-compat.js';
import { Test, Verb } from './perftest/params.js';
import { perftestMain } from './perftest/main.js';

runMain('ib_read_bw', (argv) => perftestMain(progName('ib_read_bw'), Verb.READ, Test.BW, argv));
