#!/usr/bin/env node
/**
 * ib_atomic_lat: perftest's ib_atomic_lat (linux-rdma/perftest, src/atomic_lat.c) over this package's verbs — its
 * options, side channel, output and exit status; the run itself is in perftest/main.ts.
 */
import './startup.js';
import '../index.js';
import { progName, runMain } from './c-compat.js';
import { Test, Verb } from './perftest/params.js';
import { perftestMain } from './perftest/main.js';

runMain('ib_atomic_lat', (argv) => perftestMain(progName('ib_atomic_lat'), Verb.ATOMIC, Test.LAT, argv));
