/**
 * `Symbol.dispose` and `Symbol.asyncDispose`, which `using` / `await using` call. Node has them
 * from 20.4 (and 18.18); on the 20.x releases before, they are made here, once, with the
 * registered symbols Node itself uses (`Symbol.for('nodejs.dispose')`,
 * `Symbol.for('nodejs.asyncDispose')`), so objects of this package dispose under either. Imported
 * for its effect first by every entry point (before the verbs and CM classes that define
 * disposers are evaluated) and by the CM modules that define them.
 */
const symbols = Symbol as { dispose?: symbol; asyncDispose?: symbol };
symbols.dispose ??= Symbol.for('nodejs.dispose');
symbols.asyncDispose ??= Symbol.for('nodejs.asyncDispose');

export {};
