#!/usr/bin/env node
/**
 * ib_write_lat: perftest's ib_write_lat (linux-rdma/perftest, src/write_lat.c) over this package's verbs — its
 * options, side channel, output and exit status; the run itself is in perftest/main.ts.
 */
import './startup.js';
import '../index.js';
import { progName, runMain } from './c-compat.js';
import { Test, Verb } from './perftest/params.js';
import { perftestMain } from './perftest/main.js';

runMain('ib_write_lat', (argv) => perftestMain(progName('ib_write_lat'), Verb.WRITE, Test.LAT, argv));
